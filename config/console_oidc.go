package config

import (
	"cmp"
	"net/url"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// ConsoleOIDCCallbackPath is where the console receives the OpenID Provider's answer: console.oidc's
// redirect_url must end in it (and be registered at the provider as the client's redirect URI).
const ConsoleOIDCCallbackPath = "/ui/oidc/callback"

// DefaultConsoleOIDCPrincipalClaim is the claim an OIDC sign-in's name is read from when
// console.oidc.principal_claim is not set: sub, the one claim every provider sends and never reuses.
const DefaultConsoleOIDCPrincipalClaim = "sub"

// ConsoleOIDC lets approvers sign in to the console with their organisation's OpenID Provider
// (authorization code flow with PKCE) instead of a key of their own. The name read from
// PrincipalClaim must be a console.approvers name: the provider says who someone is, the config
// says who may approve.
type ConsoleOIDC struct {
	Issuer         string `yaml:"issuer"`          // the provider's issuer URL; discovery is read from it
	ClientID       string `yaml:"client_id"`       // the console's client at the provider
	ClientSecret   string `yaml:"client_secret"`   // written as ${VAR}; empty for a public client (PKCE only)
	RedirectURL    string `yaml:"redirect_url"`    // https://<console host>/ui/oidc/callback, as registered
	PrincipalClaim string `yaml:"principal_claim"` // the claim that names the approver; sub by default
}

func (l *loader) consoleOIDC(n ast.Node, path string) *ConsoleOIDC {
	x := &ConsoleOIDC{}
	l.object(n, path, fields{
		"issuer":          set(&x.Issuer, l.str),
		"client_id":       set(&x.ClientID, l.str),
		"client_secret":   set(&x.ClientSecret, l.secretRef),
		"redirect_url":    set(&x.RedirectURL, l.str),
		"principal_claim": set(&x.PrincipalClaim, l.str),
	})
	return x
}

// checkConsoleOIDC checks console.oidc: an issuer on https (plain http on loopback only: the tokens
// travel on it), a client id, and a redirect URL the console serves.
func (l *loader) checkConsoleOIDC(c *Config) {
	o := c.Console.OIDC
	const path = "console.oidc"
	if o == nil || l.bad[path] {
		return
	}
	l.required(path, "issuer", o.Issuer, "the OpenID Provider's issuer URL, such as \"https://login.example.com\"")
	if o.Issuer != "" {
		l.checkTokenURL(path+".issuer", o.Issuer)
	}
	l.required(path, "client_id", o.ClientID, "the console's client id at the provider")
	l.required(path, "redirect_url", o.RedirectURL, "the console's callback as the provider redirects to it, such as \"https://toolgate.example.com"+ConsoleOIDCCallbackPath+"\"")
	if o.RedirectURL != "" {
		l.checkURL(path+".redirect_url", o.RedirectURL)
		if u, err := url.Parse(o.RedirectURL); err == nil && u.Host != "" && u.Path != ConsoleOIDCCallbackPath {
			l.reportAt(path+".redirect_url", "expected a URL whose path is %s (where the console receives the provider's answer), got path %q", ConsoleOIDCCallbackPath, u.Path)
		}
	}
	if cl := o.PrincipalClaim; cl != "" && (strings.ContainsAny(cl, " \t\"\\") || strings.IndexFunc(cl, isControl) >= 0) {
		l.reportAt(path+".principal_claim", "expected a claim name such as email or preferred_username, got %q", cl)
	}
}

// ConsoleOIDCConfig is console.oidc with its defaults applied, or nil when approvers sign in with
// keys only.
func (c *Config) ConsoleOIDCConfig() *ConsoleOIDC {
	if c.Console.OIDC == nil {
		return nil
	}
	o := *c.Console.OIDC
	o.PrincipalClaim = cmp.Or(o.PrincipalClaim, DefaultConsoleOIDCPrincipalClaim)
	return &o
}
