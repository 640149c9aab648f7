package config

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/toolgate/toolgate/upstreams/egress"
)

// Egress is mcpServers.<name>.egress (docs/configuration.md, "Egress"): the addresses beyond public ones
// that the server's connections, and its token endpoint's, may reach. The guard itself is package
// upstreams/egress; read the parsed list through Server.EgressAllow.
type Egress struct {
	// Allow lists classes (loopback, private, link_local) and CIDR prefixes (10.20.0.0/16). The cloud
	// metadata addresses cannot be allowed.
	Allow []string `yaml:"allow"`
}

func (l *loader) egress(n ast.Node, path string) *Egress {
	e := &Egress{}
	l.object(n, path, fields{"allow": set(&e.Allow, l.strList)})
	return e
}

// EgressAllow is the server's egress.allow parsed: the classes and the prefixes it allows besides
// public addresses. Load has checked every entry; one that does not parse is skipped.
func (s *Server) EgressAllow() ([]egress.Class, []netip.Prefix) { return s.Egress.allowed() }

// EgressAllow is the webhook's egress.allow parsed, as Server.EgressAllow.
func (w Webhook) EgressAllow() ([]egress.Class, []netip.Prefix) { return w.Egress.allowed() }

func (e *Egress) allowed() ([]egress.Class, []netip.Prefix) {
	if e == nil {
		return nil, nil
	}
	var classes []egress.Class
	var prefixes []netip.Prefix
	for _, a := range e.Allow {
		c, p, err := egress.ParseAllow(a)
		switch {
		case err != nil:
		case c != "":
			classes = append(classes, c)
		default:
			prefixes = append(prefixes, p)
		}
	}
	return classes, prefixes
}

// checkEgress checks mcpServers.<name>.egress, and fails fast on a url or token_url that names an address
// (or localhost) the guard would refuse at every connection: the fix, a line of egress.allow, is named.
// A host name is checked only when it is resolved, at dial time.
func (l *loader) checkEgress(path string, s *Server) {
	if s.Egress != nil {
		l.onlyFor(path, "egress", s.Transport == TransportStdio, "http and sse servers (url); a stdio server's network is its own")
		l.checkEgressAllow(path, s.Egress)
	}
	if s.Transport != TransportHTTP && s.Transport != TransportSSE {
		return
	}
	classes, prefixes := s.EgressAllow()
	guard := egress.New(egress.Options{Allow: classes, AllowPrefixes: prefixes})
	l.checkEgressURL(path+".url", s.URL, guard, "server")
	if s.Auth != nil && s.Auth.TokenURL != "" {
		l.checkEgressURL(path+".auth.token_url", s.Auth.TokenURL, guard, "server")
	}
}

// checkEgressAllow checks each entry of <path>.egress.allow.
func (l *loader) checkEgressAllow(path string, e *Egress) {
	for i, a := range e.Allow {
		p := index(path+".egress.allow", i)
		if _, _, err := egress.ParseAllow(a); err != nil && !l.bad[p] {
			l.reportAt(p, "%s", err.Error())
		}
	}
}

// checkEgressURL fails fast on a URL whose host is an address (or localhost) guard refuses; owner
// ("server", "webhook") names whose egress.allow would open it. The URL itself is never quoted: a
// webhook's may be a credential.
func (l *loader) checkEgressURL(path, raw string, guard *egress.Guard, owner string) {
	u, err := url.Parse(raw)
	if err != nil || l.bad[path] {
		return
	}
	host := u.Hostname()
	addr, err := netip.ParseAddr(host)
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		addr, err = netip.MustParseAddr("127.0.0.1"), nil
	}
	if err != nil {
		return
	}
	class, ok := guard.Allowed(addr)
	switch {
	case ok:
	case class == egress.Metadata:
		l.reportAt(path, "%s is a cloud metadata address, which toolgate never connects to", host)
	case class == egress.Loopback || class == egress.Private || class == egress.LinkLocal:
		l.reportAt(path, "%s is a %s address, which the egress guard refuses unless the %s allows it: add egress: {allow: [%s]}",
			host, class, owner, class)
	default:
		l.reportAt(path, "%s is a %s address, which the egress guard refuses unless the %s allows it: add its prefix to egress.allow",
			host, class, owner)
	}
}
