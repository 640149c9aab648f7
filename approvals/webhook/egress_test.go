package webhook

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/upstreams/egress"
)

// names is a resolver without DNS: each host resolves to the address given.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// dialCounter dials for real and counts the connections the guard let through.
type dialCounter struct{ n atomic.Int32 }

func (d *dialCounter) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.n.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// The attack: a webhook URL pointed by mistake (or by a DNS answer) at the cloud metadata service
// would have the gateway POST there, from inside the machine that may read its credentials.
// Deliveries dial through the egress guard: a name that resolves to 169.254.169.254, the address
// itself, or a proxy there, is refused before any connection, even with link_local allowed, and not
// retried; the log says why, naming the host and never the URL.
func TestWebhookToMetadataAddressRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook Hook
	}{
		{"a name resolving there", Hook{URL: "https://hooks.example.com/services/T0/B0/XXXXSECRET"}},
		{"the address itself", Hook{URL: "http://169.254.169.254/latest/meta-data/iam/security-credentials/"}},
		{"a proxy there", Hook{URL: "https://slack.example.com/services/XXXXSECRET", Proxy: "http://169.254.169.254:3128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials dialCounter
			h := tc.hook
			h.Name, h.Payload = "approvals.rules[0].webhooks[0]", FormatSlack
			h.Egress = egress.Options{Allow: []egress.Class{egress.LinkLocal}, Resolver: names{"hooks.example.com": "169.254.169.254"}, Dial: dials.dial}
			n, done := notifier(t, Options{}, h)
			n.Created(heldRefund(), 0)
			r := <-done
			if r.Delivered || r.Attempts != 1 || !strings.Contains(r.Err, "egress refused") || !strings.Contains(r.Err, "169.254.169.254, a metadata address") &&
				!strings.Contains(r.Err, "169.254.169.254 is a metadata address") || strings.Contains(r.Err, "XXXXSECRET") {
				t.Errorf("result %+v", r)
			}
			if d := dials.n.Load(); d != 0 {
				t.Errorf("%d connections made", d)
			}
		})
	}
}

// A receiver on loopback (the gateway's own admin listener, say) is refused unless the hook allows
// it: nothing arrives there.
func TestWebhookToLoopbackRefusedUnlessAllowed(t *testing.T) {
	srv, got := receiver(t)
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: srv.URL, Secret: "x", Egress: egress.Options{Dial: new(dialCounter).dial}})
	n.Created(heldRefund(), 0)
	if r := <-done; r.Delivered || r.Attempts != 1 || !strings.Contains(r.Err, "is a loopback address, which egress.allow does not allow") {
		t.Errorf("result %+v", r)
	}
	select {
	case d := <-got:
		t.Fatalf("a refused delivery arrived: %s", d.body)
	default:
	}
}

// forwardProxy is an HTTP proxy on loopback that answers every request it is sent itself, and
// tells which URL each asked for.
func forwardProxy(t *testing.T) (*httptest.Server, <-chan string) {
	t.Helper()
	asked := make(chan string, 4)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		asked <- r.URL.String()
	}))
	t.Cleanup(p.Close)
	return p, asked
}

// The attack: HTTP_PROXY in the gateway's environment (set for something else, or by whoever can
// set it) would carry every delivery, its arguments and signature, through a proxy that also
// resolves and connects where the guard cannot check. Deliveries ignore it: the receiver gets the
// delivery directly and the proxy sees nothing. (net/http reads the variables once per process, so
// this test proves the most when it runs alone: go test -run TestWebhookIgnoresProxyEnvironment.)
func TestWebhookIgnoresProxyEnvironment(t *testing.T) {
	proxy, asked := forwardProxy(t)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	srv, got := receiver(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// A name, not 127.0.0.1: net/http never proxies requests to loopback addresses anyway.
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: "http://hooks.example.com:" + port + "/hook", Secret: "x",
		Egress: egress.Options{Allow: []egress.Class{egress.Loopback}, Resolver: names{"hooks.example.com": "127.0.0.1"}}})
	n.Created(heldRefund(), 0)
	select {
	case <-got:
	case u := <-asked:
		t.Fatalf("the delivery went through the environment's proxy: %s", u)
	}
	if r := <-done; !r.Delivered {
		t.Errorf("result %+v", r)
	}
}

// A configured proxy is used, and the guard checks its address (here loopback, allowed), not the
// receiver's, which only the proxy resolves.
func TestWebhookThroughConfiguredProxy(t *testing.T) {
	proxy, asked := forwardProxy(t)
	u, _ := url.Parse(proxy.URL)
	u.User = url.UserPassword("gw", "proxy-password")
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: "http://hooks.example.com/hook", Secret: "x", Proxy: u.String(),
		Egress: egress.Options{Allow: []egress.Class{egress.Loopback}, Resolver: names{}}})
	n.Created(heldRefund(), 0)
	// The delivery first: the proxy is asked before it answers, so once the delivery is done,
	// asked has its value if the proxy was used. (A select on both could pick done when both
	// were ready, about one run in a hundred under load.)
	r := <-done
	select {
	case got := <-asked:
		if got != "http://hooks.example.com/hook" {
			t.Errorf("the proxy was asked for %s", got)
		}
		if !r.Delivered {
			t.Errorf("result %+v", r)
		}
	default: // delivered elsewhere, or failed, without asking the proxy
		t.Fatalf("the configured proxy was not used: %+v", r)
	}
}
