package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	for addr, want := range map[string]Class{
		"169.254.169.254":        Metadata,
		"::ffff:169.254.169.254": Metadata,
		"fd00:ec2::254":          Metadata,
		"169.254.170.2":          Metadata,
		"100.100.100.200":        Metadata,
		"127.0.0.1":              Loopback,
		"127.8.9.10":             Loopback,
		"::1":                    Loopback,
		"::ffff:127.0.0.1":       Loopback,
		"10.1.2.3":               Private,
		"172.16.0.1":             Private,
		"172.31.255.255":         Private,
		"192.168.1.1":            Private,
		"100.64.0.1":             Private,
		"fc00::1":                Private,
		"fd12:3456::1":           Private,
		"169.254.1.1":            LinkLocal,
		"fe80::1":                LinkLocal,
		"0.0.0.0":                Unspecified,
		"0.1.2.3":                Unspecified,
		"::":                     Unspecified,
		"224.0.0.1":              Multicast,
		"ff02::1":                Multicast,
		"192.0.2.1":              Reserved, // documentation
		"198.18.0.1":             Reserved, // benchmarking
		"240.0.0.1":              Reserved,
		"255.255.255.255":        Reserved,
		"2001:db8::1":            Reserved,
		"2002:7f00:1::":          Reserved, // 6to4 of 127.0.0.1
		"64:ff9b::7f00:1":        Reserved, // NAT64 of 127.0.0.1
		"8.8.8.8":                Public,
		"172.32.0.1":             Public,
		"2606:4700::1111":        Public,
	} {
		if got := Classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Classify(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestMetadataIsNeverAllowed: no class and no prefix opens the metadata
// service, not even 0.0.0.0/0 or ::/0.
func TestMetadataIsNeverAllowed(t *testing.T) {
	g := New(Options{Allow: AllowableClasses, AllowPrefixes: []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"), netip.MustParsePrefix("169.254.169.254/32")}})
	for _, a := range []string{"169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254"} {
		if c, ok := g.Allowed(netip.MustParseAddr(a)); ok || c != Metadata {
			t.Errorf("%s: allowed %v, class %s; want refused as metadata", a, ok, c)
		}
	}
	if _, ok := g.Allowed(netip.MustParseAddr("169.254.1.1")); !ok {
		t.Error("link_local was allowed by name and is still refused")
	}
}

func TestAllowedByDefaultOnlyPublic(t *testing.T) {
	g := New(Options{})
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "169.254.1.1", "0.0.0.0", "192.0.2.1", "fc00::1"} {
		if _, ok := g.Allowed(netip.MustParseAddr(a)); ok {
			t.Errorf("%s is allowed by the zero Options", a)
		}
	}
	if _, ok := g.Allowed(netip.MustParseAddr("93.184.215.14")); !ok {
		t.Error("a public address is refused")
	}
	p := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	if _, ok := p.Allowed(netip.MustParseAddr("10.20.3.4")); !ok {
		t.Error("10.20.3.4 is refused though 10.20.0.0/16 is allowed")
	}
	if _, ok := p.Allowed(netip.MustParseAddr("10.21.0.1")); ok {
		t.Error("10.21.0.1 is allowed though only 10.20.0.0/16 is")
	}
}

func TestParseAllow(t *testing.T) {
	for _, tc := range []struct {
		in     string
		class  Class
		prefix string
		err    string
	}{
		{in: "loopback", class: Loopback},
		{in: "private", class: Private},
		{in: "link_local", class: LinkLocal},
		{in: "10.20.0.0/16", prefix: "10.20.0.0/16"},
		{in: "fd00:1::/64", prefix: "fd00:1::/64"},
		{in: "metadata", err: "the cloud metadata addresses are never allowed"},
		{in: "public", err: `expected one of loopback, private, link_local or a CIDR prefix such as 10.20.0.0/16, got "public"`},
		{in: "10.1.2.3", err: `got "10.1.2.3"`},
		{in: "10.1.2.3/8", err: "expected a CIDR prefix with no host bits set: 10.0.0.0/8, not 10.1.2.3/8"},
	} {
		c, p, err := ParseAllow(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAllow(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseAllow(%q): %v", tc.in, err)
		case c != tc.class || tc.prefix != "" && p.String() != tc.prefix:
			t.Errorf("ParseAllow(%q) = %q, %v", tc.in, c, p)
		}
	}
}

// names is a Resolver without DNS; it counts its lookups.
type names struct {
	mu      sync.Mutex
	addrs   map[string][]netip.Addr
	lookups int
}

func resolver(m map[string]string) *names {
	n := &names{addrs: map[string][]netip.Addr{}}
	for host, list := range m {
		for a := range strings.SplitSeq(list, ",") {
			n.addrs[host] = append(n.addrs[host], netip.MustParseAddr(a))
		}
	}
	return n
}

func (n *names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lookups++
	if a, ok := n.addrs[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (n *names) set(host, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addrs[host] = []netip.Addr{netip.MustParseAddr(addr)}
}

// trap is a listener that stands in for an address a test cannot listen on
// (169.254.169.254): the guard's Dial routes that address here, so a
// connection the guard wrongly made would arrive. routed records every
// address Dial was given.
type trap struct {
	ln     net.Listener
	mu     sync.Mutex
	routed []string
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &trap{ln: ln}
}

// dial routes the metadata address (any port) to the trap and dials
// everything else as it is.
func (tr *trap) dial(ctx context.Context, network, address string) (net.Conn, error) {
	tr.mu.Lock()
	tr.routed = append(tr.routed, address)
	tr.mu.Unlock()
	if strings.HasPrefix(address, "169.254.169.254:") {
		address = tr.ln.Addr().String()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (tr *trap) dialled() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.routed...)
}

// assertNoConnection proves the trap accepted nothing: it connects a
// canary and requires the canary to be the first connection accepted
// (the accept queue is first in, first out).
func (tr *trap) assertNoConnection(t *testing.T) {
	t.Helper()
	canary, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()
	if _, err := canary.Write([]byte("canary")); err != nil {
		t.Fatal(err)
	}
	conn, err := tr.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	first := make([]byte, 6)
	if _, err := io.ReadFull(conn, first); err != nil || string(first) != "canary" {
		t.Fatalf("the trap accepted a connection before the canary (it read %q, %v)", first, err)
	}
}

func assertRefused(t *testing.T, err error, class Class) {
	t.Helper()
	r, ok := IsRefused(err)
	if !ok {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if r.Class != class {
		t.Fatalf("refused as %s, want %s (%v)", r.Class, class, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("the refusal is not a dial *net.OpError: %#v", err)
	}
}

// TestNameResolvingToMetadataIsRefusedWithoutAConnection: a host name that
// resolves to 169.254.169.254 is refused before any connection, through
// DialContext and through an HTTP client on the guard's Transport, and the
// refusal is logged with the address class.
func TestNameResolvingToMetadataIsRefusedWithoutAConnection(t *testing.T) {
	tr := newTrap(t)
	var logs bytes.Buffer
	var refused []Class
	g := New(Options{Allow: AllowableClasses, Resolver: resolver(map[string]string{"metadata.test": "169.254.169.254"}),
		Dial: tr.dial, Log: slog.New(slog.NewTextHandler(&logs, nil)), Refused: func(c Class) { refused = append(refused, c) }})
	_, err := g.DialContext(context.Background(), "tcp", "metadata.test:80")
	assertRefused(t, err, Metadata)
	if got := err.Error(); !strings.Contains(got, "metadata.test resolves to 169.254.169.254, a metadata address") {
		t.Errorf("message %q does not say what was refused", got)
	}
	client := &http.Client{Transport: g.Transport()}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://metadata.test/latest/meta-data/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("GET through the guard reached the metadata address")
	}
	assertRefused(t, err, Metadata)
	if d := tr.dialled(); len(d) != 0 {
		t.Errorf("Dial was given %v", d)
	}
	tr.assertNoConnection(t)
	if !strings.Contains(logs.String(), `msg="egress refused" host=metadata.test address=169.254.169.254 class=metadata`) {
		t.Errorf("log lacks the refusal with its class:\n%s", logs.String())
	}
	if len(refused) != 2 || refused[0] != Metadata || refused[1] != Metadata {
		t.Errorf("Refused heard %v, want metadata twice", refused)
	}
}

// TestRedirectToMetadataIsRefusedWithoutAConnection: an allowed server that
// redirects to a name resolving to 169.254.169.254 gets the client (which
// follows redirects) no further: the redirect's connection is checked too.
func TestRedirectToMetadataIsRefusedWithoutAConnection(t *testing.T) {
	tr := newTrap(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://metadata.test/latest/meta-data/iam/", http.StatusFound)
	}))
	defer srv.Close()
	g := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: resolver(map[string]string{"metadata.test": "169.254.169.254"}), Dial: tr.dial})
	client := &http.Client{Transport: g.Transport()}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the redirect reached the metadata address")
	}
	assertRefused(t, err, Metadata)
	if n := hits.Load(); n != 1 {
		t.Errorf("the allowed server got %d requests, want 1", n)
	}
	for _, d := range tr.dialled() {
		if strings.HasPrefix(d, "169.254.") {
			t.Errorf("Dial was given %s", d)
		}
	}
	tr.assertNoConnection(t)
}

// TestOneRefusedAddressRefusesTheName: a name that resolves to an allowed
// address and a refused one is refused whole, before any connection.
func TestOneRefusedAddressRefusesTheName(t *testing.T) {
	tr := newTrap(t)
	g := New(Options{Allow: []Class{Loopback}, Resolver: resolver(map[string]string{"mixed.test": "127.0.0.1,169.254.169.254"}), Dial: tr.dial})
	_, err := g.DialContext(context.Background(), "tcp", "mixed.test:"+port(tr.ln))
	assertRefused(t, err, Metadata)
	if d := tr.dialled(); len(d) != 0 {
		t.Errorf("Dial was given %v", d)
	}
	tr.assertNoConnection(t)
}

// TestLoopbackRefusedUnlessAllowed: the zero Options refuse a loopback
// server without connecting; allowing loopback reaches it.
func TestLoopbackRefusedUnlessAllowed(t *testing.T) {
	tr := newTrap(t)
	_, err := New(Options{Dial: tr.dial}).DialContext(context.Background(), "tcp", tr.ln.Addr().String())
	assertRefused(t, err, Loopback)
	tr.assertNoConnection(t)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	client := &http.Client{Transport: New(Options{Allow: []Class{Loopback}}).Transport()}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
}

// TestTheCheckedAddressIsTheOneDialled: the name is resolved once per
// connection and Dial is given the address that was checked, never the
// name, so DNS cannot answer differently between the check and the
// connection (rebinding). After the name rebinds to the metadata address,
// the next connection is refused.
func TestTheCheckedAddressIsTheOneDialled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	tr := newTrap(t)
	names := resolver(map[string]string{"rebind.test": "127.0.0.1"})
	g := New(Options{Allow: []Class{Loopback}, Resolver: names, Dial: tr.dial})
	conn, err := g.DialContext(context.Background(), "tcp", "rebind.test:"+port(srv.Listener))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if d := tr.dialled(); len(d) != 1 || d[0] != "127.0.0.1:"+port(srv.Listener) {
		t.Fatalf("Dial was given %v, want the checked address only", d)
	}
	names.set("rebind.test", "169.254.169.254")
	_, err = g.DialContext(context.Background(), "tcp", "rebind.test:"+port(srv.Listener))
	assertRefused(t, err, Metadata)
	if names.lookups != 2 {
		t.Errorf("%d lookups for two connections, want 2", names.lookups)
	}
	tr.assertNoConnection(t)
}

func TestTransportIgnoresProxySettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	if New(Options{}).Transport().Proxy != nil {
		t.Fatal("the guarded transport would send requests through a proxy the guard cannot check")
	}
}

func port(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// TestMetadataThroughNAT64Refused: on an IPv6-only host, 64:ff9b::a9fe:a9fe is 169.254.169.254
// through the network's NAT64 gateway, and 2002:a9fe:a9fe:: is it through a 6to4 relay. A prefix
// that opens NAT64 (64:ff9b::/96, to reach IPv4 services from an IPv6-only host) or ::/0 opened
// them, though the metadata addresses are refused whatever is allowed.
func TestMetadataThroughNAT64Refused(t *testing.T) {
	g := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("::/0")}})
	for _, a := range []string{"64:ff9b::a9fe:a9fe", "64:ff9b::169.254.170.2", "2002:a9fe:a9fe::1", "64:ff9b::6464:64c8"} {
		if c, ok := g.Allowed(netip.MustParseAddr(a)); ok || c != Metadata {
			t.Errorf("%s: allowed %v, class %s; want refused as metadata", a, ok, c)
		}
	}
	if c, ok := g.Allowed(netip.MustParseAddr("64:ff9b::a00:1")); !ok || c != Reserved {
		t.Errorf("64:ff9b::a00:1 (10.0.0.1 through NAT64): allowed %v, class %s; want allowed by its prefix", ok, c)
	}
}
