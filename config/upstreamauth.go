package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// UpstreamAuth is how toolgate authenticates to one HTTP upstream: mcpServers.<name>.auth
// (docs/configuration.md, "Upstream credentials"). Without it, or with mode static, the upstream gets
// the configured headers and nothing else. Read the mode through Server.AuthMode.
//
// Mode oauth (each user's own authorization, code + PKCE) discovers its authorization server, so it
// takes no token_url; its client_id and client_secret are optional (a client registered beforehand),
// and list_as is its own. per_user (a secret per principal, kept in the vault) has keys of its own
// only: header, format, service_secret.
type UpstreamAuth struct {
	// Mode is static (the default), client_credentials or token_exchange (AuthStatic, ...).
	Mode string `yaml:"mode"`
	// TokenURL is the authorization server's token endpoint; https, or http on loopback only.
	TokenURL string `yaml:"token_url"`
	// ClientID and ClientSecret are the gateway's client at the authorization server. The secret must be
	// written as ${VAR}: a literal secret in the file is refused at load.
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`   // scope requested for the upstream's token
	Audience     string   `yaml:"audience"` // audience parameter (RFC 8693), sent when set
	Resource     string   `yaml:"resource"` // resource parameter (RFC 8707), sent when set: the upstream's URL
	// SubjectTokenType (token_exchange) is how the caller's JWT is presented: access_token (the default)
	// or jwt, the RFC 8693 token types urn:ietf:params:oauth:token-type:access_token and ...:jwt.
	SubjectTokenType string `yaml:"subject_token_type"`
	// Fallback (token_exchange) is what a caller without a JWT (an API key, stdio, anonymous) gets: ""
	// (the default), refused with tool_not_allowed; client_credentials, the gateway's own token.
	Fallback string `yaml:"fallback"`

	// Header (per_user) is the request header each user's secret goes in; Authorization by default.
	Header string `yaml:"header"`
	// Format (per_user) is the header's value, with {secret} where the secret goes; "Bearer {secret}" by
	// default.
	Format string `yaml:"format"`
	// ServiceSecret (per_user) is what the gateway's own requests (initialize, listing) carry, formatted
	// like a user's; without it they carry no credential. Written as ${VAR}.
	ServiceSecret string `yaml:"service_secret"`

	// Issuer (oauth) is the authorization server the upstream must name: another one is refused before
	// anything is sent to it. Required with client_secret, which must never reach another server.
	Issuer string `yaml:"issuer"`

	// ListAs (oauth, required) is the principal whose token the gateway's own requests (initialize,
	// listing, the listening stream) carry: what that principal sees upstream is listed to every caller
	// the policy allows, so the operator names them; toolgate never picks a connected user.
	ListAs string `yaml:"list_as"`
}

// The modes of an upstream's auth block.
const (
	AuthStatic            = "static"
	AuthClientCredentials = "client_credentials"
	AuthTokenExchange     = "token_exchange"
	AuthPerUser           = "per_user"
	AuthOAuth             = "oauth"
)

// UpstreamAuthModes are the values mcpServers.<name>.auth.mode accepts.
var UpstreamAuthModes = []string{AuthStatic, AuthClientCredentials, AuthTokenExchange, AuthPerUser, AuthOAuth}

// The subject token types of token_exchange, as written.
var subjectTokenTypes = []string{"access_token", "jwt"}

// AuthMode is the server's auth mode: auth.mode, static when there is no auth block.
func (s *Server) AuthMode() string {
	if s.Auth == nil || s.Auth.Mode == "" {
		return AuthStatic
	}
	return s.Auth.Mode
}

func (l *loader) upstreamAuth(n ast.Node, path string) *UpstreamAuth {
	a := &UpstreamAuth{}
	l.object(n, path, l.upstreamAuthFields(a))
	return a
}

func (l *loader) upstreamAuthFields(x *UpstreamAuth) fields {
	f := l.perUserFields(x)
	for k, v := range l.tokenAuthFields(x) {
		f[k] = v
	}
	return f
}

func (l *loader) tokenAuthFields(x *UpstreamAuth) fields {
	return fields{
		"mode":               set(&x.Mode, l.str),
		"token_url":          set(&x.TokenURL, l.str),
		"client_id":          set(&x.ClientID, l.str),
		"client_secret":      set(&x.ClientSecret, l.secretRef),
		"scopes":             set(&x.Scopes, l.strList),
		"audience":           set(&x.Audience, l.str),
		"resource":           set(&x.Resource, l.str),
		"subject_token_type": set(&x.SubjectTokenType, l.str),
		"fallback":           set(&x.Fallback, l.str),
		"list_as":            set(&x.ListAs, l.str),
		"issuer":             set(&x.Issuer, l.str),
	}
}

// secretRefRe is the one way a secret may be written: a reference to one environment variable, with no
// default (a default would be a literal secret in the file).
var secretRefRe = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// secretRef decodes a secret that must come from the environment: a secret written in the file ends up
// in backups, diffs, tickets and support bundles. The value is never quoted in a message.
func (l *loader) secretRef(n ast.Node, path string) string {
	raw, ok := l.text(n, path, "a string")
	if !ok {
		return ""
	}
	if !secretRefRe.MatchString(strings.TrimSpace(raw)) {
		l.fail(n, path, "expected a reference to an environment variable such as \"${ORDERS_CLIENT_SECRET}\": "+
			"a secret is never written in the config file (the value is not repeated here)")
		return ""
	}
	return l.expand(strings.TrimSpace(raw), n, path)
}

// checkUpstreamAuth checks mcpServers.<name>.auth: a known mode, on a Streamable HTTP server; the keys
// its mode needs, and none it would ignore; and no Authorization header beside a mode that sets it.
func (l *loader) checkUpstreamAuth(c *Config, server string, s *Server) {
	path := server + ".auth"
	a := s.Auth
	if a == nil || l.bad[path] {
		return
	}
	l.checkOneOf(path+".mode", a.Mode, UpstreamAuthModes)
	mode := s.AuthMode()
	if mode == AuthStatic {
		for _, k := range []struct {
			key   string
			isSet bool
		}{{"token_url", a.TokenURL != ""}, {"client_id", a.ClientID != ""}, {"client_secret", a.ClientSecret != ""},
			{"scopes", a.Scopes != nil}, {"audience", a.Audience != ""}, {"resource", a.Resource != ""},
			{"subject_token_type", a.SubjectTokenType != ""}, {"fallback", a.Fallback != ""}} {
			l.onlyFor(path, k.key, k.isSet, "auth modes client_credentials and token_exchange (mode static sends the configured headers only)")
		}
		l.perUserKeysOnlyFor(path, a, "mode static sends the configured headers only")
		l.onlyFor(path, "list_as", a.ListAs != "", "auth mode oauth")
		l.onlyFor(path, "issuer", a.Issuer != "", "auth mode oauth")
		return
	}
	if l.bad[path+".mode"] || !slices.Contains(UpstreamAuthModes, mode) {
		return
	}
	switch {
	case s.Transport == TransportStdio:
		l.reportAt(path+".mode", "mode %s applies only to Streamable HTTP servers (url); a stdio server gets its credentials through env", mode)
		return
	case s.Transport == TransportSSE:
		l.reportAt(path+".mode", "mode %s applies only to Streamable HTTP servers, not type: sse", mode)
		return
	}
	if mode != AuthOAuth {
		l.onlyFor(path, "list_as", a.ListAs != "", "auth mode oauth")
		l.onlyFor(path, "issuer", a.Issuer != "", "auth mode oauth (the other modes name their token_url)")
	}
	if mode == AuthPerUser {
		l.tokenKeysOnlyFor(path, a)
		l.checkPerUser(server, s)
		return
	}
	l.perUserKeysOnlyFor(path, a, "mode "+mode+" sets Authorization to a token")
	for name := range s.Headers {
		if strings.EqualFold(name, "Authorization") {
			l.reportAt(child(server+".headers", name), "an Authorization header cannot be set beside auth mode %s, which sets it on every request", mode)
		}
	}
	if mode == AuthOAuth {
		l.checkOAuth(path, a)
		return
	}
	l.required(path, "token_url", a.TokenURL, "the authorization server's token endpoint, such as \"https://idp.example.com/oauth/token\"")
	if a.TokenURL != "" {
		l.checkTokenURL(path+".token_url", a.TokenURL)
	}
	l.required(path, "client_id", a.ClientID, "the gateway's client id at the authorization server")
	l.required(path, "client_secret", a.ClientSecret, "the gateway's client secret, as ${VAR}")
	if a.Resource != "" {
		l.checkIdentifierURL(path+".resource", a.Resource, "https://mcp.example.com/mcp")
	}
	l.checkScopes(path, a.Scopes)
	if mode == AuthClientCredentials {
		l.onlyFor(path, "subject_token_type", a.SubjectTokenType != "", "auth mode token_exchange")
		l.onlyFor(path, "fallback", a.Fallback != "", "auth mode token_exchange")
		return
	}
	l.checkOneOf(path+".subject_token_type", a.SubjectTokenType, subjectTokenTypes)
	l.checkOneOf(path+".fallback", a.Fallback, []string{AuthClientCredentials})
	if c.Auth.JWT == nil && !l.bad["auth.jwt"] {
		l.reportAt(path+".mode", "mode token_exchange exchanges the caller's JWT, and auth.jwt is not configured: no caller would have one")
	}
}

// checkOAuth checks the keys of mode oauth: the authorization server is discovered from the upstream,
// so there is no token_url; a client is optional (a metadata document or dynamic registration
// otherwise), but a secret needs its client id.
func (l *loader) checkOAuth(path string, a *UpstreamAuth) {
	for _, k := range []struct {
		key   string
		isSet bool
	}{{"token_url", a.TokenURL != ""}, {"audience", a.Audience != ""}, {"subject_token_type", a.SubjectTokenType != ""},
		{"fallback", a.Fallback != ""}} {
		l.onlyFor(path, k.key, k.isSet, "auth modes client_credentials and token_exchange (mode oauth discovers the "+
			"authorization server from the upstream)")
	}
	if a.ClientSecret != "" && a.ClientID == "" && !l.bad[path+".client_secret"] {
		l.reportAt(path+".client_secret", "a client_secret needs the client_id it belongs to")
	}
	if a.Resource != "" {
		l.checkIdentifierURL(path+".resource", a.Resource, "https://mcp.example.com/mcp")
	}
	if a.Issuer != "" {
		l.checkTokenURL(path+".issuer", a.Issuer) // https but on loopback, no user information: codes and secrets go there
	}
	if a.ClientSecret != "" && a.ClientID != "" && a.Issuer == "" && !l.bad[path+".client_secret"] {
		l.reportAt(path, "issuer is required with client_secret: the authorization server the secret belongs to, such as "+
			"\"https://auth.example.com\" (an upstream can name any server in its metadata, and the secret must go to no other)")
	}
	l.checkScopes(path, a.Scopes)
	// Whoever's token lists the upstream decides what every caller is shown: never left to chance.
	l.required(path, "list_as", strings.TrimSpace(a.ListAs), "the principal whose view of the upstream (its tools, "+
		"resources and prompts) may be listed to every caller the policy allows; the gateway's own requests carry their token")
}

func (l *loader) checkScopes(path string, scopes []string) {
	for i, sc := range scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\") || strings.IndexFunc(sc, isControl) >= 0 {
			l.reportAt(index(path+".scopes", i), "expected one scope token (no spaces, quotes or backslashes), got %q", sc)
		}
	}
}

func (l *loader) required(path, key, v, what string) {
	if v == "" && !l.bad[path+"."+key] {
		l.reportAt(path, "%s is required: %s", key, what)
	}
}

// checkTokenURL requires https except on loopback: the client secret and the tokens travel on it.
func (l *loader) checkTokenURL(path, raw string) {
	l.checkURL(path, raw)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return
	}
	switch {
	case u.User != nil:
		l.reportAt(path, "expected a URL without user information (the client authenticates with client_id and client_secret)")
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		l.reportAt(path, "expected an https:// URL (plain http is accepted for loopback hosts only: the client secret and "+
			"tokens travel on it), got %q", u.Redacted())
	}
}

// perUserKeysOnlyFor reports the keys of auth mode per_user set beside another mode.
func (l *loader) perUserKeysOnlyFor(path string, a *UpstreamAuth, why string) {
	for _, k := range []struct {
		key   string
		isSet bool
	}{{"header", a.Header != ""}, {"format", a.Format != ""}, {"service_secret", a.ServiceSecret != ""}} {
		l.onlyFor(path, k.key, k.isSet, "auth mode per_user ("+why+")")
	}
}

// tokenKeysOnlyFor reports the keys of the token modes set beside mode per_user.
func (l *loader) tokenKeysOnlyFor(path string, a *UpstreamAuth) {
	for _, k := range []struct {
		key   string
		isSet bool
	}{{"token_url", a.TokenURL != ""}, {"client_id", a.ClientID != ""}, {"client_secret", a.ClientSecret != ""},
		{"scopes", a.Scopes != nil}, {"audience", a.Audience != ""}, {"resource", a.Resource != ""},
		{"subject_token_type", a.SubjectTokenType != ""}, {"fallback", a.Fallback != ""}} {
		l.onlyFor(path, k.key, k.isSet, "auth modes client_credentials and token_exchange (mode per_user sends each user's own secret)")
	}
}
