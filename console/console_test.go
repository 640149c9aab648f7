package console

import (
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
)

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	for _, path := range []string{"/ui/signin", "/ui/approvals", "/ui/static/console.css", "/ui/nope"} {
		a := b.get(path)
		h := a.Header
		if got := h.Get("Content-Security-Policy"); got != CSP {
			t.Errorf("%s: Content-Security-Policy %q, want %q", path, got, CSP)
		}
		for _, want := range []string{"default-src 'none'", "style-src 'self'", "script-src 'self'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(h.Get("Content-Security-Policy"), want) {
				t.Errorf("%s: CSP lacks %s", path, want)
			}
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: nosniff %q, referrer %q", path, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
}

func TestNothingWithoutSignIn(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	for _, path := range []string{"/ui/", "/ui/approvals", "/ui/approvals?state=pending", "/ui/whatever"} {
		a := b.get(path)
		if a.StatusCode != http.StatusSeeOther || a.Header.Get("Location") != "/ui/signin" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /ui/signin", path, a.StatusCode, a.Header.Get("Location"))
		}
		if strings.Contains(a.body, req.ID) || strings.Contains(a.body, "4821") {
			t.Errorf("GET %s without a session shows the request", path)
		}
	}
	if a := b.get("/ui/static/"); a.StatusCode != http.StatusNotFound {
		t.Errorf("the static folder answers %d, want 404 (no listing)", a.StatusCode)
	}
	if a := b.get("/ui/signin"); a.StatusCode != http.StatusOK || !strings.Contains(a.body, `name="key"`) {
		t.Errorf("sign-in page: %d", a.StatusCode)
	}
	if a := b.get("/ui/static/console.css"); a.StatusCode != http.StatusOK || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %s", a.StatusCode, a.Header.Get("Content-Type"))
	}
	// A POST without a session decides nothing, whatever it carries.
	a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {"anything"}})
	if a.StatusCode != http.StatusForbidden || !strings.Contains(a.body, "not signed in") {
		t.Errorf("POST without a session: %d %s", a.StatusCode, a.body)
	}
	if got := f.state(req.ID); got.State != approvals.StatePending {
		t.Errorf("a POST without a session decided the request: %s", got.State)
	}
}

func TestSignIn(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	page := b.get("/ui/signin")
	token := csrf(t, page.body)

	// A wrong key: refused, no session.
	a := b.post("/ui/signin", url.Values{"csrf": {token}, "key": {"tga_not_a_key"}})
	if a.StatusCode != http.StatusUnauthorized || !strings.Contains(a.body, "not an approver") {
		t.Fatalf("bad key: %d %s", a.StatusCode, a.body)
	}
	if strings.Contains(a.body, "tga_not_a_key") {
		t.Error("the sign-in page echoes the key it refused")
	}
	for _, c := range a.Cookies() {
		if c.Name == sessionCookie && c.Value != "" {
			t.Fatal("a bad key got a session cookie")
		}
	}
	if a := b.get("/ui/approvals"); a.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a bad key the approvals page answers %d", a.StatusCode)
	}

	// The sign-in form's own CSRF token: missing or wrong is refused even with a good key.
	for name, form := range map[string]url.Values{
		"missing": {"key": {carolKey}},
		"wrong":   {"key": {carolKey}, "csrf": {"forged"}},
	} {
		a := b.post("/ui/signin", form)
		if a.StatusCode != http.StatusForbidden {
			t.Errorf("sign-in with a %s token: %d, want 403", name, a.StatusCode)
		}
	}

	// The good key: a session cookie with every attribute.
	token = csrf(t, b.get("/ui/signin").body)
	a = b.post("/ui/signin", url.Values{"csrf": {token}, "key": {carolKey}})
	if a.StatusCode != http.StatusSeeOther || a.Header.Get("Location") != "/ui/approvals" {
		t.Fatalf("good key: %d %s", a.StatusCode, a.body)
	}
	var got *http.Cookie
	for _, c := range a.Cookies() {
		if c.Name == sessionCookie {
			got = c
		}
	}
	if got == nil || len(got.Value) < 40 || !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.Path != "/ui/" || got.Secure {
		t.Fatalf("session cookie %+v: want a long random value, HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP", got)
	}
	if n := f.console.o.Sessions.(*MemorySessions).Len(); n != 1 {
		t.Errorf("%d sessions stored, want 1", n)
	}
	if _, ok, _ := f.console.o.Sessions.Get(t.Context(), got.Value, f.clock.Now()); ok {
		t.Error("the store keeps the cookie value itself; it must keep only its hash")
	}
	if a := b.get("/ui/approvals"); a.StatusCode != http.StatusOK || !strings.Contains(a.body, "carol") {
		t.Fatalf("approvals page after sign-in: %d", a.StatusCode)
	}

	// Sign out: the cookie no longer opens anything, even replayed.
	stolen := &http.Cookie{Name: sessionCookie, Value: got.Value}
	a = b.post("/ui/signout", url.Values{"csrf": {csrf(t, b.get("/ui/approvals").body)}})
	if a.StatusCode != http.StatusSeeOther || a.Header.Get("Location") != "/ui/signin" {
		t.Fatalf("sign out: %d", a.StatusCode)
	}
	replay, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/ui/approvals", nil)
	replay.AddCookie(stolen)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(replay)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the cookie of a signed-out session still answers %d", resp.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn(carolKey)
	f.clock.Advance(8*time.Hour + time.Second)
	if a := b.get("/ui/approvals"); a.StatusCode != http.StatusSeeOther {
		t.Errorf("an expired session answers %d", a.StatusCode)
	}
}

func TestSecureCookieOverTLS(t *testing.T) {
	f := newFixture(t)
	r := httptest.NewRequest(http.MethodGet, "https://gw.example/ui/signin", nil)
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	f.console.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" {
			t.Errorf("cookie over TLS %+v: want Secure, HttpOnly, SameSite=Strict, Path=/ui/", c)
		}
	}
	if len(w.Result().Cookies()) == 0 {
		t.Fatal("the sign-in page set no cookie")
	}
}

func TestFailedSignInsAreLimited(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	for i := range maxFailures {
		a := b.post("/ui/signin", url.Values{"csrf": {csrf(t, b.get("/ui/signin").body)}, "key": {"wrong"}})
		if a.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, a.StatusCode)
		}
	}
	a := b.post("/ui/signin", url.Values{"csrf": {csrf(t, b.get("/ui/signin").body)}, "key": {carolKey}})
	if a.StatusCode != http.StatusTooManyRequests || a.Header.Get("Retry-After") == "" {
		t.Fatalf("after %d failures even the good key must wait: %d", maxFailures, a.StatusCode)
	}
	f.clock.Advance(failureWindow)
	b.signIn(carolKey)
}

func TestLimiterMemoryIsBounded(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	for i := range maxLimited * 3 {
		l.fail("10.0."+string(rune('a'+i%26))+"."+time.Duration(i).String(), now)
	}
	if n := l.size(); n > maxLimited+1 {
		t.Fatalf("%d addresses tracked, want at most %d", n, maxLimited+1)
	}
	// A new address meets the shared overflow bucket, which is now over the limit.
	if blocked, _ := l.blocked("192.0.2.1", now); !blocked {
		t.Error("an untracked address with a full table is not limited by the overflow bucket")
	}
	// Once the windows end, the table empties again.
	l.fail("192.0.2.2", now.Add(failureWindow))
	if n := l.size(); n != 1 {
		t.Errorf("%d addresses tracked after every window ended, want 1", n)
	}
}

func TestCSRFRefused(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	token := b.signIn(carolKey)
	for name, form := range map[string]url.Values{
		"missing": {"decision": {"approve"}},
		"wrong":   {"decision": {"approve"}, "csrf": {token + "x"}},
		"empty":   {"decision": {"approve"}, "csrf": {""}},
	} {
		a := b.post("/ui/approvals/"+req.ID, form)
		if a.StatusCode != http.StatusForbidden || !strings.Contains(a.body, "security token") {
			t.Errorf("%s CSRF token: %d %s", name, a.StatusCode, a.body)
		}
	}
	// Another session's token is not this session's.
	other := f.browser().signIn(daveKey)
	if a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {other}}); a.StatusCode != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d", a.StatusCode)
	}
	// Sign-out is a POST too.
	if a := b.post("/ui/signout", url.Values{}); a.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without a token: %d", a.StatusCode)
	}
	// A cross-site POST is refused before anything else, even with the right token.
	a := b.do(http.MethodPost, "/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {token}}, map[string]string{"Origin": "https://evil.example"})
	if a.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d", a.StatusCode)
	}
	if got := f.state(req.ID); got.State != approvals.StatePending {
		t.Fatalf("a refused POST decided the request: %s", got.State)
	}
}

func TestApprove(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821,"reason":"damaged"}`)
	f.clock.Advance(3 * time.Minute)
	b := f.browser()
	token := b.signIn(carolKey)
	page := b.get("/ui/approvals").body
	for _, want := range []string{req.ID, "alice", "orders/refund_order", "&#34;amount&#34;: 150", "policy.csv:7",
		"a, support_agent, orders/refund_order, call", "3m", "57m", "sha256:" + req.ArgsHash, `value="approve"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the approvals page lacks %q", want)
		}
	}
	a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {token}})
	if a.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", a.StatusCode, a.body)
	}
	got := f.state(req.ID)
	if got.State != approvals.StateApproved || got.DecidedBy != "carol" {
		t.Fatalf("after approve: %s by %q", got.State, got.DecidedBy)
	}
	if len(f.decided) != 1 || f.decided[0].DecidedBy != "carol" || f.decided[0].ID != req.ID {
		t.Errorf("OnDecision (the audit trail) saw %+v, want the approval by carol", f.decided)
	}
	page = b.get(a.Header.Get("Location")).body
	if !strings.Contains(page, "You approved alice&#39;s call of orders/refund_order") || !strings.Contains(page, `class="decider">carol<`) {
		t.Errorf("the page after approving lacks the notice or the decider:\n%s", page)
	}
	// Deciding it again is refused: it is no longer pending.
	a = b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"deny"}, "csrf": {token}})
	if a.StatusCode != http.StatusConflict || !strings.Contains(a.body, "already approved by carol") {
		t.Errorf("second decision: %d", a.StatusCode)
	}
}

func TestDenyWithReason(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	token := b.signIn(carolKey)
	a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"deny"}, "reason": {"  not <b>this</b> one  "}, "csrf": {token}})
	if a.StatusCode != http.StatusSeeOther {
		t.Fatalf("deny: %d %s", a.StatusCode, a.body)
	}
	got := f.state(req.ID)
	if got.State != approvals.StateDenied || got.DecidedBy != "carol" || got.Reason != "not <b>this</b> one" {
		t.Fatalf("after deny: %+v", got)
	}
	page := b.get("/ui/approvals").body
	if strings.Contains(page, "<b>this</b>") || !strings.Contains(page, "not &lt;b&gt;this&lt;/b&gt; one") {
		t.Error("the deny reason is not escaped on the page")
	}
}

func TestScriptInArgumentsIsText(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"note":"</pre><script>alert(1)</script><img src=x onerror=alert(2)>","order_id":4821}`)
	b := f.browser()
	b.signIn(carolKey)
	page := b.get("/ui/approvals").body
	if strings.Contains(page, "<script>") || strings.Contains(page, "<img src=x") || strings.Contains(page, "</pre><script") {
		t.Fatalf("markup from the arguments reached the page unescaped:\n%s", page)
	}
	if !strings.Contains(page, "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;") {
		t.Errorf("the arguments are not shown as text:\n%s", page)
	}
	if !strings.Contains(page, req.ID) {
		t.Error("the request is not listed")
	}
}

func TestApproverWithoutTheRightIsRefused(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	token := b.signIn(daveKey) // a support agent: no approve line
	page := b.get("/ui/approvals").body
	if !strings.Contains(page, "The policy does not let you approve orders/refund_order calls") || strings.Contains(page, `value="approve"`) {
		t.Errorf("dave's page offers to decide, or does not say why not:\n%s", page)
	}
	for _, d := range []string{"approve", "deny"} {
		a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {d}, "csrf": {token}})
		if a.StatusCode != http.StatusForbidden || !strings.Contains(a.body, "does not let you approve") || !strings.Contains(a.body, "Nothing was decided") {
			t.Errorf("dave's %s: %d %s", d, a.StatusCode, a.body)
		}
	}
	if got := f.state(req.ID); got.State != approvals.StatePending || len(f.decided) != 0 {
		t.Fatalf("dave's refused decision changed the request: %s, decisions %v", got.State, f.decided)
	}

	// The approve line's condition is the policy's too: carol may approve up to 1000.
	big := f.hold("alice", `{"amount":5000,"order_id":4822}`)
	cb := f.browser()
	token = cb.signIn(carolKey)
	a := cb.post("/ui/approvals/"+big.ID, url.Values{"decision": {"approve"}, "csrf": {token}})
	if a.StatusCode != http.StatusForbidden || f.state(big.ID).State != approvals.StatePending {
		t.Errorf("carol approving 5000 past her approve line's condition: %d, %s", a.StatusCode, f.state(big.ID).State)
	}
}

func TestSelfApprovalRefused(t *testing.T) {
	f := newFixture(t)
	req := f.hold("carol", `{"amount":600,"order_id":4821}`) // carol's own refund, held by the supervisor a line
	b := f.browser()
	token := b.signIn(carolKey)
	if page := b.get("/ui/approvals").body; !strings.Contains(page, "You made this call, so you cannot decide it") {
		t.Errorf("carol's page does not say she cannot decide her own call")
	}
	a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {token}})
	if a.StatusCode != http.StatusForbidden || !strings.Contains(a.body, "You made this call") {
		t.Errorf("self-approval: %d %s", a.StatusCode, a.body)
	}
	if got := f.state(req.ID); got.State != approvals.StatePending {
		t.Fatalf("self-approval decided the request: %s", got.State)
	}
}

func TestExpiredRequestRefused(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	token := b.signIn(carolKey)
	f.clock.Advance(time.Hour)
	if page := b.get("/ui/approvals").body; strings.Contains(page, `id="`+req.ID+`"`) {
		t.Error("an expired request is still listed as waiting")
	}
	a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {"approve"}, "csrf": {token}})
	if a.StatusCode != http.StatusConflict || !strings.Contains(a.body, "has expired") {
		t.Errorf("approving an expired request: %d %s", a.StatusCode, a.body)
	}
	if got := f.state(req.ID); got.State != approvals.StateExpired || got.DecidedBy != "" {
		t.Fatalf("after the refused approval: %s by %q", got.State, got.DecidedBy)
	}
	if a := b.post("/ui/approvals/apr_nope", url.Values{"decision": {"approve"}, "csrf": {token}}); a.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown request: %d", a.StatusCode)
	}
}

func TestLongPagesAreCompressed(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.hold("alice", fmt.Sprintf(`{"amount":%d,"order_id":4821}`, 60+i))
	}
	b := f.browser()
	b.signIn(carolKey)
	a := b.do(http.MethodGet, "/ui/approvals", nil, map[string]string{"Accept-Encoding": "gzip"})
	if a.StatusCode != http.StatusOK || a.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%d, Content-Encoding %q", a.StatusCode, a.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(page), "&#34;amount&#34;: 64") {
		t.Errorf("the gzipped page does not read back: %v", err)
	}
}

func TestPendingPages(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range MaxPendingShown + 5 {
		ids = append(ids, f.hold("alice", fmt.Sprintf(`{"amount":%d,"order_id":4821}`, 60+i)).ID)
	}
	b := f.browser()
	b.signIn(carolKey)
	first := b.get("/ui/approvals").body
	if !strings.Contains(first, fmt.Sprintf("Showing 1 to %d of %d", MaxPendingShown, MaxPendingShown+5)) ||
		!strings.Contains(first, `id="`+ids[0]+`"`) || strings.Contains(first, `id="`+ids[MaxPendingShown]+`"`) ||
		!strings.Contains(first, fmt.Sprintf(`href="/ui/approvals?from=%d"`, MaxPendingShown)) {
		t.Fatal("the first page does not show the oldest requests with a link to the rest")
	}
	next := b.get(fmt.Sprintf("/ui/approvals?from=%d", MaxPendingShown)).body
	if !strings.Contains(next, `id="`+ids[MaxPendingShown+4]+`"`) || strings.Contains(next, `id="`+ids[0]+`"`) || !strings.Contains(next, `href="/ui/approvals?from=0"`) {
		t.Fatal("the second page does not show the newest requests with a link back")
	}
	if a := b.get("/ui/approvals?from=-7"); a.StatusCode != http.StatusOK || !strings.Contains(a.body, `id="`+ids[0]+`"`) {
		t.Error("a negative from is not the first page")
	}
}
