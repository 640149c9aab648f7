package config

import (
	"cmp"
	"net/url"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// DefaultConsoleSessionTTL is how long a console sign-in lasts when console.session_ttl is not set.
const DefaultConsoleSessionTTL = 8 * time.Hour

// consoleSessionTTLRange bounds console.session_ttl.
var consoleSessionTTLRange = durRange{min: time.Minute, max: 7 * 24 * time.Hour}

func (l *loader) consoleFields(x *Console) fields {
	return fields{
		"approvers":   set(&x.Approvers, l.approvers),
		"session_ttl": set(&x.SessionTTL, l.duration),
		"oidc":        set(&x.OIDC, l.consoleOIDC),
		"public_url":  set(&x.PublicURL, l.str),
	}
}

func (l *loader) approverFields(x *Approver) fields {
	return fields{
		"name":   set(&x.Name, l.str),
		"sha256": set(&x.SHA256, l.str),
	}
}

func (l *loader) approvers(n ast.Node, path string) []Approver {
	return objectList(l, n, path, "{name, sha256}", l.approverFields)
}

// checkConsole checks console: every approver has a name usable as a policy principal and a key hash
// (never echoed: an operator who pasted the key itself must not find it in a log), names and hashes are
// distinct, and no approver key is also an API key or the admin key: a sign-in key is a credential of
// its own, so that handing an agent its API key never lets it sign in to decide its own calls.
func (l *loader) checkConsole(c *Config) {
	x := &c.Console
	l.checkDuration("console.session_ttl", x.SessionTTL, consoleSessionTTLRange)
	l.checkConsoleOIDC(c)
	l.checkPublicURL("console.public_url", x.PublicURL)
	others := map[string]string{} // hash -> what else uses it
	for i, k := range c.Auth.APIKeys {
		if k.SHA256 != "" {
			others[k.SHA256] = index("auth.api_keys", i)
		}
	}
	if c.Admin.KeySHA256 != "" {
		others[c.Admin.KeySHA256] = "admin.key_sha256"
	}
	names := map[string]string{}
	hashes := map[string]string{}
	for i := range x.Approvers {
		p := index("console.approvers", i)
		a := &x.Approvers[i]
		np, hp := p+".name", p+".sha256"
		switch {
		case a.Name != "":
			l.checkPrincipal(np, a.Name)
			if first, dup := names[a.Name]; dup && !l.bad[np] {
				l.reportAt(np, "same name as %s (line %d); every approver must be listed once", first, l.lines[first])
			}
			names[a.Name] = p
		case !l.bad[np]:
			l.reportAt(p, "name is required: who signs in with this key (decisions are recorded under it, and the policy's approve lines are asked about it)")
		}
		a.SHA256 = strings.ToLower(a.SHA256)
		switch {
		case l.bad[hp]:
			continue
		case a.SHA256 == "" && x.OIDC != nil:
			continue // signs in through console.oidc only
		case a.SHA256 == "":
			l.reportAt(p, "sha256 is required: the SHA-256 hex of the approver's sign-in key (`toolgate keys new --approver <name>` prints it), unless console.oidc is set and they sign in there")
			continue
		case !sha256Hex.MatchString(a.SHA256):
			l.reportAt(hp, "expected 64 hex characters (the SHA-256 of the sign-in key, not the key), got %d characters", len(a.SHA256))
			a.SHA256 = ""
			continue
		}
		if first, dup := hashes[a.SHA256]; dup {
			l.reportAt(hp, "same key hash as %s (line %d); every approver must have a key of their own", first, l.lines[first])
		}
		hashes[a.SHA256] = p
		if other, dup := others[a.SHA256]; dup {
			l.reportAt(hp, "same key hash as %s; an approver's sign-in key must be a key of its own (`toolgate keys new --approver <name>` mints one)", other)
		}
	}
}

// ConsoleEnabled reports whether the console is served (/ui/ on the admin listener): when at least one
// approver is configured.
func (c *Config) ConsoleEnabled() bool { return len(c.Console.Approvers) > 0 }

// ConsoleApprovers are the console's approvers, as configured (hashes lowercase after Load).
func (c *Config) ConsoleApprovers() []Approver { return c.Console.Approvers }

// ConsoleSessionTTL is how long a console sign-in lasts: console.session_ttl, else
// DefaultConsoleSessionTTL.
func (c *Config) ConsoleSessionTTL() time.Duration {
	return time.Duration(cmp.Or(c.Console.SessionTTL, Duration(DefaultConsoleSessionTTL)))
}

// checkPublicURL requires an absolute http(s) URL without user information, query or fragment: links
// to requests are made by appending /ui/approvals#<id> to it.
func (l *loader) checkPublicURL(path, raw string) {
	if raw == "" {
		return
	}
	l.checkURL(path, raw)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		l.reportAt(path, "expected the console's base URL (scheme, host and an optional path prefix), without user information, query or fragment")
	}
}

// ConsolePublicURL is console.public_url without a trailing slash; without it, the origin of
// console.oidc.redirect_url (the console's address as the provider sends approvers back to it);
// else "".
func (c *Config) ConsolePublicURL() string {
	if c.Console.PublicURL != "" {
		return strings.TrimRight(c.Console.PublicURL, "/")
	}
	if o := c.Console.OIDC; o != nil && o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	return ""
}
