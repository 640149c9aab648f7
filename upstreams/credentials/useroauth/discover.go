package useroauth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/sanitize"
)

// maxMetadata caps what is read of a metadata document or a registration answer.
const maxMetadata = 64 << 10

// Challenge is what an upstream's 401 said in its WWW-Authenticate Bearer challenge.
type Challenge struct {
	ResourceMetadata string // resource_metadata: where its protected-resource metadata is
	Scope            string // scope: what the request needed
}

// ParseChallenge reads the Bearer challenge of a WWW-Authenticate value (RFC 6750 section 3, RFC
// 9728 section 5.1). Parameters of other schemes are ignored.
func ParseChallenge(header string) Challenge {
	var c Challenge
	rest := strings.TrimSpace(header)
	for rest != "" {
		scheme, params, next := nextChallenge(rest)
		if strings.EqualFold(scheme, "Bearer") {
			c.ResourceMetadata, c.Scope = params["resource_metadata"], params["scope"]
			return c
		}
		rest = next
	}
	return c
}

// nextChallenge splits the first challenge off s: its scheme, its auth-params, and what follows.
func nextChallenge(s string) (scheme string, params map[string]string, rest string) {
	scheme, s, _ = strings.Cut(strings.TrimSpace(s), " ")
	params = map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " ,") {
			return scheme, params, s // the next challenge starts here (or nothing is left)
		}
		name := strings.ToLower(strings.TrimSpace(s[:eq]))
		var value string
		value, s = paramValue(s[eq+1:])
		params[name] = value
	}
}

// paramValue reads a token or a quoted string at the start of s.
func paramValue(s string) (value, rest string) {
	if !strings.HasPrefix(s, `"`) {
		end := strings.IndexAny(s, " ,")
		if end < 0 {
			return s, ""
		}
		return s[:end], s[end:]
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:]
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), ""
}

// ResourceMetadata is an upstream's protected-resource metadata (RFC 9728 section 2).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is an authorization server's metadata (RFC 8414 section 2), the fields used here.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
}

// Discovery is what was learned of an upstream's authorization: its resource identifier, the
// authorization server's metadata, and the scopes to ask for when none are configured.
type Discovery struct {
	Resource string
	Server   ServerMetadata
	Scope    string // from the 401's challenge, else the resource's scopes_supported; "" to omit
}

// errNoPKCE: the authorization server does not say it supports S256, and a client of an MCP server
// must then not proceed.
var errNoPKCE = errors.New("its authorization server does not advertise PKCE S256 (code_challenge_methods_supported)")

// discover probes the upstream without a token and follows its 401 to the authorization server's
// metadata. upstream is the upstream's MCP URL.
func (s *Source) discover(ctx context.Context) (*Discovery, error) {
	ch, err := s.probe(ctx)
	if err != nil {
		return nil, err
	}
	rm, err := s.resourceMetadata(ctx, ch)
	if err != nil {
		return nil, err
	}
	d := &Discovery{Resource: cmp.Or(s.o.Resource, s.o.URL), Scope: ch.Scope}
	issuer := origin(s.o.URL) // an upstream without resource metadata (the 2025-03-26 revision): its origin
	if rm != nil {
		if !resourceCovers(rm.Resource, s.o.URL) {
			return nil, fmt.Errorf("its protected-resource metadata names resource %q, which is not this upstream's URL", clip(rm.Resource))
		}
		if len(rm.AuthorizationServers) == 0 {
			return nil, errors.New("its protected-resource metadata names no authorization server")
		}
		issuer = rm.AuthorizationServers[0]
		d.Resource = cmp.Or(s.o.Resource, rm.Resource)
		if d.Scope == "" {
			d.Scope = strings.Join(rm.ScopesSupported, " ")
		}
	}
	if s.o.Issuer != "" && !sameIssuer(issuer, s.o.Issuer) {
		// Nothing is fetched from, or sent to, a server the operator did not name.
		return nil, fmt.Errorf("it names authorization server %q, not the configured auth.issuer %q; nothing is sent there",
			clip(issuer), clip(s.o.Issuer))
	}
	meta, err := s.serverMetadata(ctx, issuer, rm == nil)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(meta.CodeChallengeMethodsSupported, "S256") {
		return nil, errNoPKCE
	}
	d.Server = *meta
	return d, nil
}

// probe sends the upstream an initialize request without a token and reads its challenge. An
// upstream that does not answer 401 gives an empty challenge: the well-known locations are tried.
func (s *Source) probe(ctx context.Context) (Challenge, error) {
	body := `{"jsonrpc":"2.0","id":"toolgate-auth-probe","method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"toolgate","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, strings.NewReader(body))
	if err != nil {
		return Challenge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.http.Do(req)
	if err != nil {
		return Challenge{}, fmt.Errorf("the upstream could not be reached: %w", urlErr(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadata))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return Challenge{}, nil
	}
	return ParseChallenge(resp.Header.Get("WWW-Authenticate")), nil
}

// resourceMetadata fetches the protected-resource metadata the challenge names, else from the
// well-known locations (the path-aware one first). nil, nil when there is none at all.
func (s *Source) resourceMetadata(ctx context.Context, ch Challenge) (*ResourceMetadata, error) {
	var candidates []string
	if ch.ResourceMetadata != "" {
		candidates = append(candidates, ch.ResourceMetadata)
	} else {
		u, _ := url.Parse(s.o.URL)
		if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
			candidates = append(candidates, origin(s.o.URL)+"/.well-known/oauth-protected-resource"+p)
		}
		candidates = append(candidates, origin(s.o.URL)+"/.well-known/oauth-protected-resource")
	}
	for _, c := range candidates {
		var rm ResourceMetadata
		found, err := s.getJSON(ctx, c, &rm)
		if err != nil {
			return nil, fmt.Errorf("protected-resource metadata: %w", err)
		}
		if found {
			return &rm, nil
		}
	}
	if ch.ResourceMetadata != "" {
		return nil, errors.New("the protected-resource metadata its 401 names was not found")
	}
	return nil, nil
}

// serverMetadata fetches the authorization server's metadata from the locations an MCP client tries
// for issuer, in order, and checks the issuer it states. legacy (no protected-resource metadata)
// falls back to the default endpoints at the issuer when none is found.
func (s *Source) serverMetadata(ctx context.Context, issuer string, legacy bool) (*ServerMetadata, error) {
	for _, loc := range metadataLocations(issuer) {
		var m ServerMetadata
		found, err := s.getJSON(ctx, loc, &m)
		if err != nil {
			return nil, fmt.Errorf("authorization server metadata: %w", err)
		}
		if !found {
			continue
		}
		// RFC 8414 section 3.3: the issuer must be the one the metadata was looked up for. An upstream of
		// the 2025-03-26 revision (legacy) names no issuer; its origin's metadata is its own statement.
		if !legacy && strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("authorization server metadata states issuer %q, not %q", clip(m.Issuer), clip(issuer))
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, errors.New("authorization server metadata names no authorization or token endpoint")
		}
		return &m, nil
	}
	if legacy {
		base := strings.TrimSuffix(issuer, "/")
		return &ServerMetadata{Issuer: issuer, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token",
			RegistrationEndpoint: base + "/register", CodeChallengeMethodsSupported: []string{"S256"}}, nil
	}
	return nil, fmt.Errorf("no authorization server metadata found for %q", clip(issuer))
}

// metadataLocations are where an issuer's metadata may be: RFC 8414 section 3.1 (path inserted after
// the well-known prefix), then OpenID Connect Discovery both with the path inserted and appended.
func metadataLocations(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	o := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{o + "/.well-known/oauth-authorization-server", o + "/.well-known/openid-configuration"}
	}
	return []string{o + "/.well-known/oauth-authorization-server" + p, o + "/.well-known/openid-configuration" + p,
		o + p + "/.well-known/openid-configuration"}
}

// getJSON fetches a metadata document into v; found is false for a 404 (or any 4xx: not there).
func (s *Source) getJSON(ctx context.Context, loc string, v any) (found bool, err error) {
	if err := checkFetchURL(loc); err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return false, urlErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s answered HTTP %d", hostOf(loc), resp.StatusCode)
	}
	return true, decodeJSON(resp, v)
}

func decodeJSON(resp *http.Response, v any) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return urlErr(err)
	}
	if len(body) > maxMetadata {
		return fmt.Errorf("%s answered more than %d bytes", hostOf(resp.Request.URL.String()), maxMetadata)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if (mt != "" && mt != "application/json") || json.Unmarshal(bytes.TrimSpace(body), v) != nil {
		return fmt.Errorf("%s answered something that is not JSON", hostOf(resp.Request.URL.String()))
	}
	return nil
}

// checkFetchURL refuses a metadata location that is not http(s) or carries user information: the
// locations come from the upstream and its authorization server.
func checkFetchURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%q is not an http(s) URL", clip(raw))
	}
	return nil
}

// resourceCovers reports whether resource identifies the upstream at target: the same origin, and a
// path that is target's or a parent of it (a server may protect several endpoints under one
// resource).
func resourceCovers(resource, target string) bool {
	r, err1 := url.Parse(resource)
	t, err2 := url.Parse(target)
	if err1 != nil || err2 != nil || !strings.EqualFold(r.Scheme, t.Scheme) || !strings.EqualFold(r.Host, t.Host) {
		return false
	}
	rp, tp := strings.TrimSuffix(r.Path, "/")+"/", strings.TrimSuffix(t.Path, "/")+"/"
	return strings.HasPrefix(tp, rp)
}

// origin is scheme://host of u.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	return p.Host
}

// urlErr drops *url.Error's wrapping, which quotes the whole URL.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// clip is a value a server sent, printable and short, for a message.
func clip(s string) string { return sanitize.Clip(sanitize.Text(s), 120) }
