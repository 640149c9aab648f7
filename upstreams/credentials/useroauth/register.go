package useroauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// How the gateway's client authenticates at the token endpoint (RFC 7591 section 2).
const (
	authBasic = "client_secret_basic"
	authPost  = "client_secret_post"
	authNone  = "none"
)

// Registration is the gateway's client at an upstream's authorization server, as kept in the vault
// (Kind Registration, Principal "") when it was registered dynamically.
type Registration struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"token_endpoint_auth_method"`
	RedirectURI  string `json:"redirect_uri"`
	// Via is how the client came to be: "configured", "metadata_document" or "dynamic".
	Via string `json:"via"`
}

// errNoRegistration: none of the ways to have a client at the authorization server applies.
var errNoRegistration = errors.New("no client at its authorization server: configure auth.client_id (the server offers neither " +
	"dynamic registration nor client ID metadata documents, or connect.client_metadata_url is not set)")

// registration is the client to use at d's authorization server, in the order an MCP client
// prefers: the configured client id; a Client ID Metadata Document, where the server supports them
// and the gateway serves one; a dynamic registration, kept in the vault (made once per issuer and
// redirect URI).
func (s *Source) registration(ctx context.Context, d *Discovery) (*Registration, error) {
	switch {
	case s.o.ClientID != "":
		method := authNone
		if s.o.ClientSecret != "" {
			method = pickSecretMethod(d.Server.TokenEndpointAuthMethodsSupported)
			// auth.issuer, when set, was enforced by discovery; and a pin must not outlive the
			// operator's change of it.
			if s.o.Issuer == "" {
				if err := s.pinConfiguredIssuer(ctx, d.Server.Issuer); err != nil {
					return nil, err
				}
			}
		}
		return &Registration{Issuer: d.Server.Issuer, ClientID: s.o.ClientID, ClientSecret: s.o.ClientSecret,
			AuthMethod: method, RedirectURI: s.o.RedirectURL(), Via: "configured"}, nil
	case d.Server.ClientIDMetadataDocumentSupported && s.o.ClientMetadataURL != "":
		return &Registration{Issuer: d.Server.Issuer, ClientID: s.o.ClientMetadataURL, AuthMethod: authNone,
			RedirectURI: s.o.RedirectURL(), Via: "metadata_document"}, nil
	case d.Server.RegistrationEndpoint != "":
		return s.dynamicRegistration(ctx, d)
	}
	return nil, errNoRegistration
}

// errRegisteredElsewhere: the upstream names another authorization server than the one the gateway
// registered at dynamically.
var errRegisteredElsewhere = errors.New("the upstream now names another authorization server than the one the gateway " +
	"registered at; nothing is sent there (if the move is intended, set auth.issuer to the new server)")

// errIssuerMoved: the upstream names another authorization server than the one the configured client
// was first used with, and the client's secret is not sent there.
var errIssuerMoved = errors.New("the upstream now names another authorization server than the one its configured client " +
	"was first used with; the client secret is not sent there (if the move is intended, configure the client " +
	"registered at the new server: its client_id)")

// pinConfiguredIssuer keeps, on first use, which authorization server the configured client with a
// secret belongs to (the vault's Registration entry, without the secret), and refuses another one
// later: the upstream can name any server in its metadata, and a client secret sent to a server that
// did not issue it is a secret given away. Another client_id in the config starts a new pin.
func (s *Source) pinConfiguredIssuer(ctx context.Context, issuer string) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	data, _, err := s.o.Vault.Get(ctx, s.registrationKey())
	switch {
	case err == nil:
		var r Registration
		if json.Unmarshal(data, &r) == nil && r.Via == "configured" && r.ClientID == s.o.ClientID {
			if !sameIssuer(r.Issuer, issuer) {
				s.log.Warn("the upstream names another authorization server than its configured client's; nothing is sent there",
					"server", s.o.Server, "first_used_with", clip(r.Issuer), "now_named", clip(issuer))
				return errIssuerMoved
			}
			return nil
		}
	case !errors.Is(err, vault.ErrNotFound):
		return fmt.Errorf("the vault: %w", err)
	}
	pin, _ := json.Marshal(Registration{Issuer: issuer, ClientID: s.o.ClientID, Via: "configured"})
	if err := s.o.Vault.Put(ctx, vault.Entry{Key: s.registrationKey(), Updated: s.now(), Source: "configured client, first use"}, pin); err != nil {
		return fmt.Errorf("the vault: %w", err)
	}
	return nil
}

// pickSecretMethod is how a client with a secret authenticates: client_secret_basic, which RFC 8414
// makes the default when the server lists nothing, unless the server lists only client_secret_post.
func pickSecretMethod(supported []string) string {
	if len(supported) > 0 && !slices.Contains(supported, authBasic) && slices.Contains(supported, authPost) {
		return authPost
	}
	return authBasic
}

func (s *Source) registrationKey() vault.Key {
	return vault.Key{Upstream: s.o.Server, Kind: vault.Registration}
}

// dynamicRegistration is the stored registration for this issuer and redirect URI, or a new one
// (RFC 7591), stored. Registrations are serialized so that concurrent first connects register once.
func (s *Source) dynamicRegistration(ctx context.Context, d *Discovery) (*Registration, error) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	data, _, err := s.o.Vault.Get(ctx, s.registrationKey())
	switch {
	case err == nil:
		var r Registration
		if json.Unmarshal(data, &r) == nil && r.Issuer == d.Server.Issuer && r.RedirectURI == s.o.RedirectURL() && r.ClientID != "" {
			return &r, nil
		}
		if r.Via == "dynamic" && !sameIssuer(r.Issuer, d.Server.Issuer) && s.o.Issuer == "" {
			// Pinned at the first registration: the users' codes and verifiers do not follow an
			// upstream to a server it names later unless the operator says so (auth.issuer).
			s.log.Warn("the upstream names another authorization server than the one the gateway registered at; "+
				"nothing is sent there", "server", s.o.Server, "registered_at", clip(r.Issuer), "now_named", clip(d.Server.Issuer))
			return nil, errRegisteredElsewhere
		}
	case !errors.Is(err, vault.ErrNotFound):
		return nil, fmt.Errorf("the vault: %w", err)
	}
	r, err := s.register(ctx, d)
	if err != nil {
		return nil, err
	}
	data, _ = json.Marshal(r)
	entry := vault.Entry{Key: s.registrationKey(), Updated: s.now(), Source: "dynamic registration"}
	if err := s.o.Vault.Put(ctx, entry, data); err != nil {
		return nil, fmt.Errorf("the vault: %w", err)
	}
	s.log.Info("registered at the upstream's authorization server", "server", s.o.Server, "issuer", d.Server.Issuer)
	return r, nil
}

// registrationRequest is RFC 7591 section 2, what the gateway asks for.
type registrationRequest struct {
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope,omitempty"`
}

type registrationResponse struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
	Error                   string `json:"error"`
}

func (s *Source) register(ctx context.Context, d *Discovery) (*Registration, error) {
	if err := checkFetchURL(d.Server.RegistrationEndpoint); err != nil {
		return nil, fmt.Errorf("registration endpoint: %w", err)
	}
	method := pickSecretMethod(d.Server.TokenEndpointAuthMethodsSupported)
	if ms := d.Server.TokenEndpointAuthMethodsSupported; len(ms) > 0 && !slices.Contains(ms, method) && slices.Contains(ms, authNone) {
		method = authNone
	}
	body, _ := json.Marshal(registrationRequest{ClientName: s.clientName(), RedirectURIs: []string{s.o.RedirectURL()},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: method, Scope: s.scope(d)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.RegistrationEndpoint, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("registration endpoint: %w", urlErr(err))
	}
	defer resp.Body.Close()
	var rr registrationResponse
	decodeErr := decodeJSON(resp, &rr)
	switch {
	case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("registration endpoint at %s answered HTTP %d %s", hostOf(d.Server.RegistrationEndpoint), resp.StatusCode, clip(rr.Error))
	case decodeErr != nil:
		return nil, fmt.Errorf("registration endpoint: %w", decodeErr)
	case rr.ClientID == "":
		return nil, errors.New("registration endpoint answered no client_id")
	}
	got := cmpMethod(rr, method)
	return &Registration{Issuer: d.Server.Issuer, ClientID: rr.ClientID, ClientSecret: rr.ClientSecret, AuthMethod: got,
		RedirectURI: s.o.RedirectURL(), Via: "dynamic"}, nil
}

// cmpMethod is the method the server registered: what it answered, else what was asked (none when
// it issued no secret).
func cmpMethod(rr registrationResponse, asked string) string {
	switch {
	case rr.TokenEndpointAuthMethod != "":
		return rr.TokenEndpointAuthMethod
	case rr.ClientSecret == "":
		return authNone
	}
	return asked
}

func (s *Source) clientName() string { return "toolgate (" + s.o.Server + ")" }

// oauthConfig is x/oauth2's view of the client at d's server.
func (s *Source) oauthConfig(d *Discovery, r *Registration) *oauth2.Config {
	style := oauth2.AuthStyleInParams // client_secret_post, and none (client_id only)
	if r.AuthMethod == authBasic {
		style = oauth2.AuthStyleInHeader
	}
	secret := r.ClientSecret
	if r.AuthMethod == authNone {
		secret = ""
	}
	var scopes []string
	if sc := s.scope(d); sc != "" {
		scopes = strings.Fields(sc)
	}
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: secret, RedirectURL: s.o.RedirectURL(), Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: d.Server.AuthorizationEndpoint, TokenURL: d.Server.TokenEndpoint, AuthStyle: style}}
}

// scope is what is asked for: the configured scopes, else what the upstream's 401 or its metadata
// named; offline_access is added when the server supports it (a refresh token outlives the access
// token, so the user is not asked again every hour).
func (s *Source) scope(d *Discovery) string {
	sc := d.Scope
	if len(s.o.Scopes) > 0 {
		sc = strings.Join(s.o.Scopes, " ")
	}
	if slices.Contains(d.Server.ScopesSupported, "offline_access") && !slices.Contains(strings.Fields(sc), "offline_access") {
		sc = strings.TrimSpace(sc + " offline_access")
	}
	return sc
}

// ClientMetadata is the Client ID Metadata Document the gateway serves at clientMetadataURL for
// redirectURL: the client_id is the document's own URL, and it has no secret.
func ClientMetadata(clientMetadataURL, redirectURL string) []byte {
	b, _ := json.Marshal(map[string]any{
		"client_id": clientMetadataURL, "client_name": "toolgate", "redirect_uris": []string{redirectURL},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": authNone,
	})
	return b
}
