package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
)

// The test policy: alice and dave are support agents whose refunds wait for an approval; carol, a
// supervisor, may approve refunds; dave may not approve anything.
const testPolicy = `p, support_agent, orders/refund_order, call, allow
p, supervisor, orders/*, call, allow
p, supervisor, orders/refund_order, approve, allow, amount <= 1000
g, alice, support_agent
g, dave, support_agent
g, carol, supervisor
a, support_agent, orders/refund_order, call
a, supervisor, orders/refund_order, call, amount > 500
`

const (
	carolKey = "tga_carol_test_key"
	daveKey  = "tga_dave_test_key"
)

func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t       *testing.T
	pol     *authz.Policy
	store   *approvals.FileStore
	clock   *fakeClock
	console *Console
	srv     *httptest.Server
	decided []approvals.Request // what OnDecision saw
	mu      sync.Mutex
}

func loadPolicy(t testing.TB) *authz.Policy {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(pol, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(filepath.Join("..", "model.conf"), pol, authz.Options{Servers: []string{"orders"}, Principals: []string{"alice", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: store, clock: clock}
	store.OnDecision(func(r approvals.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.decided = append(f.decided, r)
	})
	pol := loadPolicy(t)
	f.pol = pol
	c, err := New(Options{
		Store: approvals.Bound(store, func() approvals.RuleFinder { return f.policy() }), Policy: f.policy, Now: clock.Now,
		Approvers: []Approver{{Name: "carol", KeySHA256: hashOf(carolKey)}, {Name: "dave", KeySHA256: hashOf(daveKey)}},
		RuleText:  func(ref string) string { return "a, support_agent, orders/refund_order, call" },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.console = c
	mux := http.NewServeMux()
	mux.Handle(Prefix, c)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) policy() *authz.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pol
}

// setPolicy swaps the policy in force, as a reload does.
func (f *fixture) setPolicy(p *authz.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pol = p
}

// hold creates a pending request as the gateway would for principal's call with args, held by the
// test policy's line 7.
func (f *fixture) hold(principal, args string) approvals.Request {
	f.t.Helper()
	sum := sha256.Sum256([]byte(args))
	rule, _ := f.policy().ApprovalRule(authz.Request{Subject: authz.Subject{Principal: "alice"}, Object: "orders/refund_order",
		Action: authz.ActCall, Args: json.RawMessage(`{"amount": 1}`)}) // line 7, whoever made the call
	out, req, err := f.store.Check(context.Background(), approvals.Call{Principal: principal, Tool: "orders/refund_order",
		ArgsHash: hex.EncodeToString(sum[:]), Args: json.RawMessage(args), Rule: rule, RuleDigest: f.policy().ApprovalDigest(rule)})
	if err != nil || out != approvals.Pending {
		f.t.Fatalf("Check: %v %v", out, err)
	}
	return req
}

// browser is a client with its own cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	f    *fixture
	http *http.Client
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: f.t, f: f, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	*http.Response
	body string
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.f.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp, string(data)}
}

func (b *browser) get(path string) answer { return b.do(http.MethodGet, path, nil, nil) }
func (b *browser) post(path string, form url.Values) answer {
	return b.do(http.MethodPost, path, form, nil)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token of the first form on the page.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

// signIn signs b in with key and returns the session's CSRF token.
func (b *browser) signIn(key string) string {
	b.t.Helper()
	page := b.get("/ui/signin")
	a := b.post("/ui/signin", url.Values{"csrf": {csrf(b.t, page.body)}, "key": {key}})
	if a.StatusCode != http.StatusSeeOther || a.Header.Get("Location") != "/ui/approvals" {
		b.t.Fatalf("sign-in with %s: %d %s", key, a.StatusCode, a.body)
	}
	return csrf(b.t, b.get("/ui/approvals").body)
}

func (f *fixture) state(id string) approvals.Request {
	f.t.Helper()
	r, err := f.store.Get(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}
