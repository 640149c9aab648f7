// Package egress decides which network addresses toolgate may connect to
// on an upstream's behalf, and enforces it where the connection is made:
// every HTTP client the gateway uses toward an upstream (the upstream's
// transport, its token endpoint) dials through a Guard.
//
// An upstream URL is configuration, but where it leads is not: DNS can
// point a public name at 169.254.169.254 (the cloud metadata service),
// at loopback (the gateway's own admin listener) or at a private network,
// and can change its answer between any check and the connection (DNS
// rebinding). So the check is made at dial time, after resolution, on
// every address the name resolves to, for every new connection (redirects
// included, for clients that follow them), and the connection is made to
// the very address that was checked, never to the name again.
//
// Public addresses are allowed. Loopback, private, link-local, and the
// other special-purpose ranges of the IANA registries (from
// code.dny.dev/ssrf, generated from those registries) are refused unless
// Options.Allow names their class or Options.AllowPrefixes contains them;
// the cloud metadata addresses are refused whatever is allowed
// (docs/design.md, "Egress guard").
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Options say which non-public addresses a Guard allows, and how it
// resolves and dials. The zero value allows public addresses only, resolves
// with the system resolver and dials with a net.Dialer.
type Options struct {
	// Allow are classes of addresses allowed besides public ones: Loopback,
	// Private, LinkLocal (AllowableClasses). Metadata is never allowed.
	Allow []Class
	// AllowPrefixes are address ranges allowed whatever their class
	// (except Metadata), such as 10.20.0.0/16 for one internal network.
	AllowPrefixes []netip.Prefix

	// Resolver looks up a host name's addresses; nil: net.DefaultResolver.
	// Tests give names whatever addresses they need without DNS.
	Resolver Resolver
	// Dial connects to a checked "ip:port"; nil: a net.Dialer with the
	// timeouts of http.DefaultTransport. It is never given a name.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Log receives one warning per refused connection, with the host, the
	// address and its class; nil discards.
	Log *slog.Logger
	// Refused, when set, is told the class of every refused connection
	// (for a metric).
	Refused func(Class)
}

// Resolver is the part of *net.Resolver a Guard uses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks and makes connections. It is safe for concurrent use.
type Guard struct {
	allow    []Class
	prefixes []netip.Prefix
	resolver Resolver
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
	log      *slog.Logger
	refused  func(Class)
}

// New is a Guard with o's settings.
func New(o Options) *Guard {
	g := &Guard{allow: slices.Clone(o.Allow), prefixes: slices.Clone(o.AllowPrefixes), resolver: o.Resolver, dial: o.Dial, log: o.Log, refused: o.Refused}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		g.dial = d.DialContext
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g
}

// RefusedError is a connection the guard refused: Host resolved (or was)
// Addr, whose Class is not allowed. Its message is for the operator's log;
// it reaches clients only as "the server is unavailable". It arrives
// wrapped in a *net.OpError whose Op is "dial", so callers that tell a
// connection never made from one that broke count it as never sent.
type RefusedError struct {
	Host  string
	Addr  netip.Addr
	Class Class
}

func (e *RefusedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("egress refused: %s is a %s address, which egress.allow does not allow", e.Addr, e.Class)
	}
	return fmt.Sprintf("egress refused: %s resolves to %s, a %s address, which egress.allow does not allow", e.Host, e.Addr, e.Class)
}

// IsRefused reports whether err is (or wraps) a connection the guard
// refused, and the refusal.
func IsRefused(err error) (*RefusedError, bool) {
	var r *RefusedError
	ok := errors.As(err, &r)
	return r, ok
}

// Allowed reports whether the guard may connect to a, and a's class.
func (g *Guard) Allowed(a netip.Addr) (Class, bool) {
	a = a.Unmap()
	c := Classify(a)
	switch {
	case c == Public:
		return c, true
	case c == Metadata:
		return c, false
	case slices.Contains(g.allow, c):
		return c, true
	}
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return c, true
		}
	}
	return c, false
}

// DialContext connects to address ("host:port") as net.Dialer.DialContext
// does, but only to addresses the guard allows: a name is resolved once,
// every address it resolves to is checked (one refused address refuses the
// name: a name that mixes internal and public addresses is how rebinding
// attacks look), and the connection is made to a checked address, so the
// name is never resolved again between the check and the connection.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	addrs, err := g.lookup(ctx, network, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	for _, a := range addrs {
		if c, ok := g.Allowed(a); !ok {
			g.log.Warn("egress refused", "host", host, "address", a.Unmap().String(), "class", string(c))
			if g.refused != nil {
				g.refused(c)
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: &RefusedError{Host: host, Addr: a.Unmap(), Class: c}}
		}
	}
	var last error
	for _, a := range addrs {
		conn, err := g.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// lookup is host's addresses: host itself when it is an IP address.
func (g *Guard) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, fmt.Errorf("egress refused: address %s has a zone", host)
		}
		return []netip.Addr{a}, nil
	}
	family := "ip"
	switch network {
	case "tcp4", "udp4":
		family = "ip4"
	case "tcp6", "udp6":
		family = "ip6"
	}
	addrs, err := g.resolver.LookupNetIP(ctx, family, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// Transport is an HTTP transport with http.DefaultTransport's settings
// whose every connection is dialled through the guard. It uses no proxy,
// whatever HTTP_PROXY and HTTPS_PROXY say: a proxy would resolve and
// connect to the upstream itself, where the guard cannot check the
// address (docs/design.md, "Egress guard").
func (g *Guard) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = g.DialContext
	t.DialTLSContext = nil // TLS runs over DialContext's connection
	return t
}

// ParseAllow reads one entry of egress.allow: a class name
// (AllowableClasses) or a CIDR prefix in canonical form (10.0.0.0/8, not
// 10.1.2.3/8, which is more likely a typo than a range).
func ParseAllow(s string) (Class, netip.Prefix, error) {
	switch c := Class(s); {
	case slices.Contains(AllowableClasses, c):
		return c, netip.Prefix{}, nil
	case c == Metadata:
		return "", netip.Prefix{}, errors.New("the cloud metadata addresses are never allowed: they hand out the machine's cloud credentials")
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", netip.Prefix{}, fmt.Errorf("expected one of %s or a CIDR prefix such as 10.20.0.0/16, got %s",
			classList(AllowableClasses), strconv.Quote(s))
	}
	if p != p.Masked() {
		return "", netip.Prefix{}, fmt.Errorf("expected a CIDR prefix with no host bits set: %s, not %s", p.Masked(), s)
	}
	return "", p, nil
}
