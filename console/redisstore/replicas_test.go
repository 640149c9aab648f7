package redisstore

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
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	approvalsredis "github.com/toolgate/toolgate/approvals/redisstore"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/internal/redistest"
)

const policy = `p, support_agent, orders/refund_order, call, allow
p, supervisor, orders/refund_order, approve, allow
g, alice, support_agent
g, carol, supervisor
a, support_agent, orders/refund_order, call
`

const carolKey = "tga_carol_replicas_key"

func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// replica is one gateway's console: its own connection to the shared Redis, its own approvals
// store and sessions there, the same approvers and policy.
type replica struct {
	console *console.Console
	store   *approvalsredis.Store
}

func newReplica(t *testing.T, srv *redistest.Server, pol *authz.Policy) replica {
	t.Helper()
	c, _ := redistest.Open(t, srv, "t:")
	store := approvalsredis.New(c, time.Hour)
	con, err := console.New(console.Options{
		Store:     approvals.Bound(store, func() approvals.RuleFinder { return pol }),
		Policy:    func() *authz.Policy { return pol },
		Approvers: []console.Approver{{Name: "carol", KeySHA256: hashOf(carolKey)}},
		Sessions:  New(c),
	})
	if err != nil {
		t.Fatal(err)
	}
	return replica{console: con, store: store}
}

// balancer is one origin in front of the replicas, as a load balancer is: each request goes to the
// replica the test names, so one browser's cookies reach both.
type balancer struct {
	t        *testing.T
	srv      *httptest.Server
	replicas []replica
	http     *http.Client
}

func newBalancer(t *testing.T, rs ...replica) *balancer {
	b := &balancer{t: t, replicas: rs}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := 0
		if r.Header.Get("X-Test-Replica") == "1" {
			i = 1
		}
		rs[i].console.ServeHTTP(w, r)
	}))
	t.Cleanup(b.srv.Close)
	jar, _ := cookiejar.New(nil)
	b.http = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return b
}

type answer struct {
	status   int
	location string
	body     string
}

func (b *balancer) do(replica int, method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if replica == 1 {
		req.Header.Set("X-Test-Replica", "1")
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Location"), string(data)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

func loadPolicy(t *testing.T) *authz.Policy {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(filepath.Join("..", "..", "model.conf"), file, authz.Options{Servers: []string{"orders"}, Principals: []string{"alice", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With state.redis, every replica's console shows and decides the same requests, and a sign-in on one
// replica is a sign-in on all: carol signs in through replica 0, sees the refund held through
// replica 0 on replica 1's page, approves it there with the form replica 0 gave her, replica 0 lists
// it approved, and signing out through replica 1 ends her session on replica 0 too.
func TestTwoReplicasShareRequestsAndSessions(t *testing.T) {
	srv := redistest.Start(t)
	pol := loadPolicy(t)
	r0, r1 := newReplica(t, srv, pol), newReplica(t, srv, pol)
	rule, _ := pol.ApprovalRule(authz.Request{Subject: authz.Subject{Principal: "alice"}, Object: "orders/refund_order", Action: authz.ActCall})
	args := json.RawMessage(`{"amount":80,"order_id":4821}`)
	sum := sha256.Sum256(args)
	_, held, err := r0.store.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund_order",
		ArgsHash: hex.EncodeToString(sum[:]), Args: args, Rule: rule, RuleDigest: pol.ApprovalDigest(rule)})
	if err != nil {
		t.Fatal(err)
	}
	b := newBalancer(t, r0, r1)

	page := b.do(0, http.MethodGet, "/ui/signin", nil)
	if a := b.do(0, http.MethodPost, "/ui/signin", url.Values{"csrf": {csrf(t, page.body)}, "key": {carolKey}}); a.status != http.StatusSeeOther || a.location != "/ui/approvals" {
		t.Fatalf("sign-in through replica 0: %d %s", a.status, a.body)
	}
	token := csrf(t, b.do(0, http.MethodGet, "/ui/approvals", nil).body)
	other := b.do(1, http.MethodGet, "/ui/approvals", nil)
	if other.status != http.StatusOK || !strings.Contains(other.body, `action="/ui/approvals/`+held.ID+`"`) {
		t.Fatalf("replica 1 with replica 0's sign-in: %d %s\n%s", other.status, other.location, other.body)
	}
	if a := b.do(1, http.MethodPost, "/ui/approvals/"+held.ID, url.Values{"decision": {"approve"}, "csrf": {token}}); a.status != http.StatusSeeOther {
		t.Fatalf("approve through replica 1: %d %s", a.status, a.body)
	}
	if got, err := r0.store.Get(held.ID); err != nil || got.State != approvals.StateApproved || got.DecidedBy != "carol" {
		t.Fatalf("replica 0 reads %+v %v", got, err)
	}
	if page := b.do(0, http.MethodGet, "/ui/approvals", nil).body; strings.Contains(page, `action="/ui/approvals/`+held.ID+`"`) || !strings.Contains(page, "approved by <strong class=\"decider\">carol</strong>") {
		t.Errorf("replica 0 still offers the decided request, or does not list it decided:\n%s", page)
	}
	if a := b.do(1, http.MethodPost, "/ui/signout", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign out through replica 1: %d %s", a.status, a.body)
	}
	for i := range 2 {
		if a := b.do(i, http.MethodGet, "/ui/approvals", nil); a.status != http.StatusSeeOther || a.location != "/ui/signin" {
			t.Errorf("replica %d after signing out: %d %s", i, a.status, a.location)
		}
	}
}

// Replacing an approver's key (a reload of console.approvers) ends the sessions begun with the old
// key on every replica that reloaded, and removing the approver ends all of theirs; the new key signs
// in at once.
func TestReloadedApproversEndOldSessions(t *testing.T) {
	srv := redistest.Start(t)
	pol := loadPolicy(t)
	r0, r1 := newReplica(t, srv, pol), newReplica(t, srv, pol)
	b := newBalancer(t, r0, r1)
	signIn := func(key string) answer {
		page := b.do(0, http.MethodGet, "/ui/signin", nil)
		return b.do(0, http.MethodPost, "/ui/signin", url.Values{"csrf": {csrf(t, page.body)}, "key": {key}})
	}
	if a := signIn(carolKey); a.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", a.status)
	}
	const newKey = "tga_carol_rotated_key"
	for _, r := range []replica{r0, r1} {
		if err := r.console.SetApprovers([]console.Approver{{Name: "carol", KeySHA256: hashOf(newKey)}}); err != nil {
			t.Fatal(err)
		}
	}
	if a := b.do(1, http.MethodGet, "/ui/approvals", nil); a.status != http.StatusSeeOther || a.location != "/ui/signin" {
		t.Fatalf("a session of the replaced key: %d %s", a.status, a.location)
	}
	if a := signIn(carolKey); a.status != http.StatusUnauthorized {
		t.Fatalf("the replaced key signs in: %d", a.status)
	}
	if a := signIn(newKey); a.status != http.StatusSeeOther {
		t.Fatalf("the new key: %d %s", a.status, a.body)
	}
	if err := r1.console.SetApprovers([]console.Approver{{Name: "dan", KeySHA256: hashOf("tga_dan")}}); err != nil {
		t.Fatal(err)
	}
	if a := b.do(1, http.MethodGet, "/ui/approvals", nil); a.status != http.StatusSeeOther {
		t.Fatalf("a removed approver's session on the replica that reloaded: %d", a.status)
	}
	if err := r1.console.SetApprovers([]console.Approver{{Name: "carol", KeySHA256: "not hex"}}); err == nil {
		t.Fatal("a malformed approver was accepted")
	}
}
