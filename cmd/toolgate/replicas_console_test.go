package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authn"
)

const carolConsoleKey = "tg_carol_console_replicas"

var consoleCSRFField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleBrowser talks to the replicas' consoles through one origin, as behind a load balancer:
// each request goes to the replica the test names, with the same cookies.
type consoleBrowser struct {
	t    *testing.T
	srv  *httptest.Server
	http *http.Client
}

func newConsoleBrowser(t *testing.T, rs *replicaSet) *consoleBrowser {
	t.Helper()
	var consoles []http.Handler
	for _, gw := range rs.gws {
		h, err := gw.AdminListenerHandler()
		if err != nil {
			t.Fatal(err)
		}
		consoles = append(consoles, h)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		fmt.Sscan(r.Header.Get("X-Test-Replica"), &i)
		consoles[i].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &consoleBrowser{t: t, srv: srv, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *consoleBrowser) do(replica int, method, path string, form url.Values) (int, string, string) {
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
	req.Header.Set("X-Test-Replica", fmt.Sprint(replica))
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(data)
}

func (b *consoleBrowser) csrf(page string) string {
	b.t.Helper()
	m := consoleCSRFField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no form on the page:\n%s", page)
	}
	return m[1]
}

// With state.redis, two gateways' consoles are one console: a refund held through replica 0 is
// shown by replica 1 to carol, who signed in through replica 0; she approves it through replica 1,
// the agent's retry through replica 0 runs it once, and signing out through replica 1 signs her out
// of replica 0.
func TestReplicasShareTheConsole(t *testing.T) {
	consoleYAML := fmt.Sprintf("console:\n  approvers:\n    - {name: carol, sha256: %q}\n", authn.HashKey(carolConsoleKey))
	rs, counter := startCounterReplicas(t, 2, approvalPolicy+"p, carol, counter/count, approve, allow\n", consoleYAML)
	id := rs.needsApproval(t, rs.call(t, 0, "counter__count", refundCall))
	b := newConsoleBrowser(t, rs)

	_, _, signin := b.do(0, http.MethodGet, "/ui/signin", nil)
	if status, loc, body := b.do(0, http.MethodPost, "/ui/signin", url.Values{"csrf": {b.csrf(signin)}, "key": {carolConsoleKey}}); status != http.StatusSeeOther || loc != "/ui/approvals" {
		t.Fatalf("sign-in through replica 0: %d %s", status, body)
	}
	status, loc, page := b.do(1, http.MethodGet, "/ui/approvals", nil)
	if status != http.StatusOK || !strings.Contains(page, `action="/ui/approvals/`+id+`"`) {
		t.Fatalf("replica 1's page with replica 0's sign-in: %d %s\n%s", status, loc, page)
	}
	if status, _, body := b.do(1, http.MethodPost, "/ui/approvals/"+id, url.Values{"decision": {"approve"}, "csrf": {b.csrf(page)}}); status != http.StatusSeeOther {
		t.Fatalf("approve through replica 1: %d %s", status, body)
	}
	before := counter.Count("refund")
	if env := rs.call(t, 0, "counter__count", refundCall); env["ok"] != true || counter.Count("refund") != before+1 {
		t.Fatalf("the approved call through replica 0: %v (ran %d times)", env, counter.Count("refund")-before)
	}
	if status, _, _ := b.do(1, http.MethodPost, "/ui/signout", url.Values{"csrf": {b.csrf(page)}}); status != http.StatusSeeOther {
		t.Fatalf("sign out through replica 1: %d", status)
	}
	if status, loc, _ := b.do(0, http.MethodGet, "/ui/approvals", nil); status != http.StatusSeeOther || loc != "/ui/signin" {
		t.Errorf("replica 0 after signing out through replica 1: %d %s", status, loc)
	}
}
