package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/credentials/connect"
	"github.com/toolgate/toolgate/upstreams/credentials/useroauth"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// userAuth is what serves the upstreams that act as each caller: the connect pages on the HTTP
// listener and one credential source per auth mode oauth upstream; their tokens are in the gateway's
// vault.
type userAuth struct {
	vault   vault.Store
	links   *connect.Links
	sources map[string]*useroauth.Source
	pages   bool // some upstream is served by the pages
}

// openUserAuth builds the connect pages and the oauth upstreams' sources, on the vault openVault
// opened. The pages serve every oauth upstream (its callback is there), and the per_user upstreams
// when connect.base_url says where users reach them: without it, per_user callers are asked to have an
// operator set their secret.
func (g *Gateway) openUserAuth(network egress.Options) error {
	if g.vault == nil {
		return nil // no upstream acts as each user
	}
	ua := &userAuth{vault: g.vault, sources: map[string]*useroauth.Source{}}
	flows, secrets := map[string]connect.Flow{}, map[string]bool{}
	base := g.cfg.ConnectBaseURL()
	for _, name := range g.cfg.UsesVault() {
		s := g.cfg.Servers[name]
		switch {
		case s.Disabled:
		case s.AuthMode() == config.AuthPerUser && base != "":
			secrets[name] = true
		case s.AuthMode() == config.AuthOAuth:
			src, err := useroauth.New(g.oauthOptions(name, s, ua, serverEgress(name, s, network, g.log, g.metrics)))
			if err != nil {
				return err
			}
			ua.sources[name], flows[name] = src, src
		}
	}
	ua.pages = len(flows)+len(secrets) > 0
	if base == "" {
		base = "http://" + g.cfg.HTTPAddr() // replaced by the listener's own address at Start
	}
	o := connect.Options{BaseURL: base, OAuth: flows, Secrets: secrets, Vault: ua.vault, LinkTTL: g.cfg.ConnectLinkTTL(),
		ClientMetadataURL: g.cfg.Connect.ClientMetadataURL, Log: g.log}
	if k := g.cfg.Connect.Key; k != "" {
		o.Key = []byte(k)
	}
	if o.ClientMetadataURL != "" {
		o.ClientMetadata = useroauth.ClientMetadata(o.ClientMetadataURL, connect.RedirectURL(base))
	}
	links, err := connect.New(o)
	if err != nil {
		return err
	}
	ua.links = links
	if len(secrets) > 0 {
		g.connectURL = links.URL
	}
	g.userAuth = ua
	return nil
}

func (g *Gateway) oauthOptions(name string, s *config.Server, ua *userAuth, guard egress.Options) useroauth.Options {
	a := s.Auth
	return useroauth.Options{Server: name, URL: s.URL, Resource: a.Resource, ClientID: a.ClientID, ClientSecret: a.ClientSecret, Issuer: a.Issuer,
		ClientMetadataURL: g.cfg.Connect.ClientMetadataURL, Scopes: a.Scopes, ListAs: a.ListAs, Vault: ua.vault,
		RedirectURL: func() string { return ua.links.RedirectURL() },
		Caller: func(ctx context.Context) (string, bool) {
			p := proxy.SubjectFrom(ctx).Principal
			return p, p != ""
		},
		ConnectURL: func(principal, upstream string) string { return ua.links.URL(principal, upstream) },
		OnConnect: func(string) {
			if g.set != nil {
				g.set.Retry(name) // the upstream may have been down for want of anyone's token
			}
		},
		AskURL: askURL, Egress: guard, Log: g.log}
}

// askURL offers link to the client whose call ctx is, by URL-mode elicitation (2025-11-25), through
// the relay that passes upstreams' requests to that client: the relay sends it only to a client that
// declared elicitation in url mode. True when the user accepted.
func askURL(ctx context.Context, message, link string) bool {
	r := upstreams.RelayFrom(ctx)
	if r == nil {
		return false
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	params, _ := json.Marshal(map[string]any{"mode": "url", "message": message, "url": link,
		"elicitationId": base64.RawURLEncoding.EncodeToString(id)})
	res, err := r.Request(ctx, string(mcp.MethodElicitationCreate), params)
	var answer struct {
		Action string `json:"action"`
	}
	return err == nil && json.Unmarshal(res, &answer) == nil && answer.Action == string(mcp.ElicitationResponseActionAccept)
}

// withUserCredentials gives the oauth upstreams their sources.
func (g *Gateway) withUserCredentials(servers []upstreams.Server) []upstreams.Server {
	if g.userAuth == nil {
		return servers
	}
	for i := range servers {
		if src, ok := g.userAuth.sources[servers[i].Name]; ok {
			servers[i].Credentials = src
		}
	}
	return servers
}

// WithConnectPages is h serving the connect pages too: what the HTTP listener serves.
func (g *Gateway) WithConnectPages(h http.Handler) http.Handler {
	if g.userAuth == nil || !g.userAuth.pages {
		return h
	}
	mux := http.NewServeMux()
	pages := g.userAuth.links.Handler()
	for _, p := range g.userAuth.links.Paths() {
		mux.Handle(p, pages)
	}
	mux.Handle("/", h)
	return mux
}

// SetConnectBaseURL is where users' browsers reach the HTTP listener, when connect.base_url does not
// say: Start sets the listener's address; a test serving the handler itself sets its own.
func (g *Gateway) SetConnectBaseURL(base string) {
	if g.userAuth != nil && g.cfg.ConnectBaseURL() == "" {
		_ = g.userAuth.links.SetBaseURL(base)
	}
}

// ConnectLink is the link where principal connects upstream (auth mode oauth).
func (g *Gateway) ConnectLink(principal, upstream string) (string, error) {
	if g.userAuth == nil || g.userAuth.sources[upstream] == nil {
		return "", errors.New("no upstream in auth mode oauth is named " + upstream)
	}
	return g.userAuth.links.URL(principal, upstream), nil
}

// connectLinkHandler answers GET /v1/connect-link?principal=P&upstream=U on the admin listener with
// {"url": ...}: how an operator gives the first user of an oauth upstream a link, before any of its
// tools is known (a call answers with one only once the upstream is listed).
func (g *Gateway) connectLinkHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		principal, upstream := strings.TrimSpace(q.Get("principal")), q.Get("upstream")
		link, err := g.ConnectLink(principal, upstream)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case principal == "":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "principal is required"})
		case err != nil:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		default:
			_ = json.NewEncoder(w).Encode(map[string]string{"url": link})
		}
	})
}
