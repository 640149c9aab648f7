package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/internal/testoidc"
)

// chrome is a headless Chromium tab of width×height that saves screenshots in the test's artifact
// directory and counts JavaScript dialogs (none may open: no script of a page, nor from the data it
// shows, runs).
type chrome struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	dialogs atomic.Int32
}

func newChrome(t *testing.T, width, height int) *chrome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, cancelAlloc := browser(t, ctx, width, height)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	c := &chrome{t: t, ctx: bctx, dir: t.ArtifactDir()}
	if err := chromedp.Listen(bctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			c.dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := c.dialogs.Load(); n != 0 {
			t.Errorf("%d JavaScript dialogs opened", n)
		}
	})
	return c
}

func (c *chrome) do(actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, actions...); err != nil {
		loc, _ := chromedp.Run(c.ctx, chromedp.Location())
		html, _ := chromedp.Run(c.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		c.t.Fatalf("%v; the browser is at %s showing:\n%s", err, loc, html)
	}
}

// wait waits up to 10 s for sel to be visible.
func (c *chrome) wait(sel string) {
	c.t.Helper()
	wctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		loc, _ := chromedp.Run(c.ctx, chromedp.Location())
		html, _ := chromedp.Run(c.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		c.t.Fatalf("%s did not appear (%v); the browser is at %s showing:\n%s", sel, err, loc, html)
	}
}

// load runs actions that start a navigation (a click on a link or a form's button) and waits up to
// 10 s for the page they open to fire its load event, then returns its URL (after redirects). A
// selector that appears on the new page is not enough: the old page may have it too, and the new one
// shows it while the rows after it are still being parsed, so a count taken then is the old page's
// or half of the new one's (TestBrowserVisitsEveryPage once counted 2 filtered calls for 1).
func load(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) string {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(wctx, actions...)
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("no page loaded (%v); the browser is at %s showing:\n%s", err, loc, html)
	}
	return resp.URL
}

func (c *chrome) load(actions ...chromedp.Action[chromedp.Void]) string {
	c.t.Helper()
	return load(c.t, c.ctx, actions...)
}

func (c *chrome) text(sel string) string {
	c.t.Helper()
	s, err := chromedp.Run(c.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		c.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (c *chrome) eval(js string) int {
	c.t.Helper()
	n, err := chromedp.Run(c.ctx, chromedp.Evaluate[int](js))
	if err != nil {
		c.t.Fatalf("%s: %v", js, err)
	}
	return n
}

func (c *chrome) shot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, name), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// fits checks that the page needs no sideways scrolling: what a phone's screen shows is all there is.
func (c *chrome) fits(page string) {
	c.t.Helper()
	if over := c.eval("document.documentElement.scrollWidth - window.innerWidth"); over > 0 {
		c.t.Errorf("%s is %d px wider than the screen", page, over)
	}
	if n := c.eval("document.scripts.length"); n != 0 {
		c.t.Errorf("%s has %d script elements, want none", page, n)
	}
}

// TestBrowserVisitsEveryPage: on the demo gateway with real MCP calls (one allowed, one held, one
// refused), carol signs in in headless Chromium at a phone's size and goes through every page: the
// live calls (filtered by outcome through the form), a call's stages, the upstreams with the
// orders server connected and its tools pinned, and the audit page, whose verification says the
// trail is intact. Every page fits the phone's width and runs no script; each is saved as a
// screenshot.
func TestBrowserVisitsEveryPage(t *testing.T) {
	chromium(t)
	gw, _, _ := startDemo(t)
	mc := mcpClient(t, gw)
	held(t, refund(t, mc, map[string]any{"order_id": 4821, "amount": 80, "reason": "damaged <b>twice</b>"}))
	if env := refund(t, mc, map[string]any{"order_id": 4822, "amount": 20, "reason": "late"}); env["ok"] != true {
		t.Fatalf("a small refund: %v", env)
	}
	ui := "http://" + gw.AdminAddr() + "/ui/"

	c := newChrome(t, 390, 844) // a phone
	c.do(chromedp.Navigate(ui + "calls"))
	c.wait("#key") // nothing without signing in
	c.do(chromedp.SendKeys(chromedp.CSS("#key"), carolSignIn))
	c.load(chromedp.Click(chromedp.CSS("form.signin button")))
	c.wait(".who") // signed in

	c.do(chromedp.Navigate(ui + "calls"))
	c.wait("table.calls")
	if n := c.eval(`document.querySelectorAll("table.calls tbody tr").length`); n != 2 {
		t.Errorf("live calls lists %d calls, want 2", n)
	}
	c.fits("live calls")
	c.shot("calls.png")
	c.do(chromedp.SetValue(chromedp.CSS(`select[name=outcome]`), "approval_required"))
	if u := c.load(chromedp.Click(chromedp.CSS("form.filter button"))); !strings.Contains(u, "outcome=approval_required") {
		t.Fatalf("the filter form opened %s", u)
	}
	c.wait("a.clear") // only a filtered list offers to clear the filter
	if n := c.eval(`document.querySelectorAll("table.calls tbody tr").length`); n != 1 {
		t.Errorf("filtered to approval_required: %d calls, want 1", n)
	}
	c.load(chromedp.Click(chromedp.CSS(`tr.d-approval_required a`)))
	c.wait("ol.stages")
	if s := c.text("li.st-stopped"); !strings.Contains(s, "approve") || !strings.Contains(s, "approval_required") {
		t.Errorf("the held call's stopping stage reads %q", s)
	}
	if n := c.eval(`document.querySelectorAll("li.st-not-reached").length`); n < 2 {
		t.Errorf("%d stages after the held call's are marked not reached", n)
	}
	c.fits("a call")
	c.shot("call.png")

	c.do(chromedp.Navigate(ui + "upstreams"))
	c.wait("#u-orders")
	if s := strings.ToLower(c.text("#u-orders header")); !strings.Contains(s, "connected") || strings.Contains(s, "not connected") {
		t.Errorf("the orders upstream reads %q", s)
	}
	if n := c.eval(`document.querySelectorAll("#u-orders tr.pin-pinned").length`); n == 0 {
		t.Error("no tool of orders is shown pinned")
	}
	c.fits("upstreams")
	c.shot("upstreams.png")

	c.do(chromedp.Navigate(ui + "audit"))
	c.load(chromedp.Click(chromedp.CSS(`form[action="/ui/audit/verify"] button`)))
	c.wait("#result")
	if s := strings.ToLower(c.text("#result")); !strings.Contains(s, "intact") || strings.Contains(s, "not intact") {
		t.Errorf("the verification reads %q", s)
	}
	c.fits("audit")
	c.shot("audit.png")

	c.do(chromedp.Navigate(ui + "approvals"))
	c.wait("article.req")
	c.fits("approvals")
	c.shot("approvals-phone.png")
}

// TestBrowserSignsInWithOIDC: in headless Chromium, erin signs in at a real OpenID Provider (its
// own login page) and lands in the console signed in: the session cookie, SameSite=Strict, is sent
// after the provider's cross-site redirect because the console moves on from a page of its own.
func TestBrowserSignsInWithOIDC(t *testing.T) {
	chromium(t)
	op := testoidc.Start(t, testoidc.User{ID: "u-erin", Username: "erin", Email: "erin@example.com", EmailVerified: true})
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := authz.LoadPolicy(filepath.Join("..", "model.conf"), filepath.Join("..", "policy.csv"), authz.Options{Servers: []string{"orders"}, Principals: []string{"erin"}})
	if err != nil {
		t.Fatal(err)
	}
	var c *console.Console
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	c, err = console.New(console.Options{Store: store, Policy: func() *authz.Policy { return pol },
		Approvers: []console.Approver{{Name: "erin"}},
		OIDC: &console.OIDC{Issuer: op.Issuer(), ClientID: testoidc.ClientID, ClientSecret: testoidc.ClientSecret,
			RedirectURL: srv.URL + "/ui/oidc/callback", PrincipalClaim: "preferred_username"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newChrome(t, 390, 844)
	b.do(chromedp.Navigate(srv.URL + "/ui/"))
	b.wait(`a[href="/ui/oidc/start"]`)
	b.fits("sign-in")
	b.shot("signin-oidc.png")
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/oidc/start"]`)))
	b.wait("#username") // the provider's own login page
	b.do(chromedp.SendKeys(chromedp.CSS("#username"), "erin"), chromedp.SendKeys(chromedp.CSS("#password"), testoidc.Password),
		chromedp.Click(chromedp.CSS("button[type=submit]")))
	b.wait(".who")
	if who := b.text(".who"); who != "erin" {
		t.Fatalf("signed in as %q, want erin", who)
	}
	b.shot("signed-in-oidc.png")
}

// TestBrowserCallsPageWith1000: the live calls page with 1,000 calls kept, in headless Chromium:
// every row is there, and the page weight and the time from navigation to the load event are
// reported (docs/console.md, "Weight and speed").
func TestBrowserCallsPageWith1000(t *testing.T) {
	chromium(t)
	trail, err := audit.Open(audit.Options{Path: filepath.Join(t.TempDir(), "audit.log"), Fsync: audit.FsyncNever, KeepRecent: console.RecentCalls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trail.Close() })
	for i := range 1000 {
		rec := audit.Record{Kind: audit.KindCall, Principal: []string{"alice", "bob", "dave"}[i%3], Tool: "orders/refund_order",
			Args: json.RawMessage(fmt.Sprintf(`{"order_id":%d}`, i)), Decision: audit.DecisionAllowed, Attempts: 1, DurationMS: int64(i % 90)}
		if err := trail.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := authz.LoadPolicy(filepath.Join("..", "model.conf"), filepath.Join("..", "policy.csv"), authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Options{Store: store, Policy: func() *authz.Policy { return pol },
		Approvers: []console.Approver{{Name: "carol", KeySHA256: sha(carolSignIn)}},
		Pages:     console.Pages{Recent: trail.Recent, AuditPath: trail.Path()}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newChrome(t, 1200, 900)
	b.do(chromedp.Navigate(srv.URL+"/ui/signin"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), carolSignIn))
	b.load(chromedp.Click(chromedp.CSS("form.signin button")))
	b.wait(".who") // signed in
	var loads []int
	for range 3 {
		b.do(chromedp.Navigate(srv.URL + "/ui/calls"))
		b.wait("table.calls")
		loads = append(loads, b.eval(`(() => { const n = performance.getEntriesByType("navigation")[0]; return Math.round(n.loadEventEnd - n.startTime); })()`))
	}
	if n := b.eval(`document.querySelectorAll("table.calls tbody tr").length`); n != 1000 {
		t.Fatalf("%d rows, want 1000", n)
	}
	size := b.eval(`performance.getEntriesByType("navigation")[0].decodedBodySize`)
	wire := b.eval(`performance.getEntriesByType("navigation")[0].encodedBodySize`)
	t.Logf("live calls, 1,000 calls: %d bytes of HTML (%d on the wire), navigation to load event %v ms", size, wire, loads)
}

// TestBrowserApprovalsPageWith1000: the approvals page with 1,000 pending refunds, each held by the
// demo's approval rule with its digest as the gateway holds them, in headless Chromium: the first
// 100 are shown with their decision forms and a link to the rest, and the page weight and the time
// from navigation to the load event are reported (docs/console.md, "Weight and speed").
func TestBrowserApprovalsPageWith1000(t *testing.T) {
	chromium(t)
	dir := t.TempDir()
	policy, err := os.ReadFile(filepath.Join("..", "policy.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.csv"), append(policy, heldRefunds...), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := authz.LoadPolicy(filepath.Join("..", "model.conf"), filepath.Join(dir, "policy.csv"), authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	rule, needed := pol.ApprovalRule(authz.Request{Subject: authz.Subject{Principal: "alice"}, Object: "orders/refund_order", Action: authz.ActCall})
	if !needed {
		t.Fatal("the demo's approval rule does not hold alice's refunds")
	}
	store := heldThousand(t, filepath.Join(dir, "approvals.json"), approvals.Call{Principal: "alice", Tool: "orders/refund_order", Rule: rule, RuleDigest: pol.ApprovalDigest(rule)})
	c, err := console.New(console.Options{Store: store, Policy: func() *authz.Policy { return pol },
		Approvers: []console.Approver{{Name: "carol", KeySHA256: sha(carolSignIn)}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newChrome(t, 1200, 900)
	b.do(chromedp.Navigate(srv.URL+"/ui/signin"), chromedp.WaitVisible(chromedp.CSS("#key")), chromedp.SendKeys(chromedp.CSS("#key"), carolSignIn))
	b.load(chromedp.Click(chromedp.CSS("form.signin button")))
	b.wait(".who") // signed in
	var loads []int
	for range 3 {
		b.do(chromedp.Navigate(srv.URL + "/ui/approvals")) // waits for the load event
		loads = append(loads, b.eval(`(() => { const n = performance.getEntriesByType("navigation")[0]; return Math.round(n.loadEventEnd - n.startTime); })()`))
	}
	if n := b.eval(`document.querySelectorAll("article.req form.decide button[value=approve]").length`); n != 100 {
		t.Errorf("%d requests with an Approve button, want the first 100", n)
	}
	if n := b.eval(`document.querySelectorAll('a[rel=next][href*="from=100"]').length`); n == 0 {
		t.Error("no link to the requests after the first 100")
	}
	if s := b.text("#pending .count"); s != "1000" {
		t.Errorf("the pending count reads %q, want 1000", s)
	}
	size := b.eval(`performance.getEntriesByType("navigation")[0].decodedBodySize`)
	wire := b.eval(`performance.getEntriesByType("navigation")[0].encodedBodySize`)
	t.Logf("approvals, 1,000 pending: %d bytes of HTML (%d on the wire), navigation to load event %v ms", size, wire, loads)
}

// heldThousand is a file store holding 1,000 pending requests like call, with different arguments.
// The first is held through the store; the other 999 are copies of it written into its file beside
// it, because holding each through the store rewrites the whole file each time (about 30 s for
// 1,000 on a loaded 2-core machine).
func heldThousand(t *testing.T, path string, call approvals.Call) *approvals.FileStore {
	t.Helper()
	args := func(i int) string {
		return fmt.Sprintf(`{"amount":%d,"order_id":%d,"reason":"customer says the parcel arrived damaged <b>twice</b>"}`, 60+i%900, 4821+i)
	}
	call.Args = []byte(args(0))
	call.ArgsHash = sha(args(0))
	store, err := approvals.Open(path, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Check(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]json.RawMessage
	var reqs []approvals.Request
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(file["requests"], &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("the store's file holds %d requests (%v), want 1", len(reqs), err)
	}
	for i := 1; i < 1000; i++ {
		r := reqs[0]
		id := make([]byte, 16)
		rand.Read(id)
		r.ID = "apr_" + base64.RawURLEncoding.EncodeToString(id) // random as the store's, so the page compresses as it would
		r.Args, r.ArgsHash = json.RawMessage(args(i)), sha(args(i))
		reqs = append(reqs, r)
	}
	if file["requests"], err = marshalRaw(reqs); err != nil {
		t.Fatal(err)
	}
	if data, err = marshalRaw(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if store, err = approvals.Open(path, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if pending, err := store.List(approvals.StatePending); err != nil || len(pending) != 1000 {
		t.Fatalf("%d pending (%v), want 1000", len(pending), err)
	}
	return store
}

// marshalRaw is json.Marshal without escaping <, > and &, as the store writes its file.
func marshalRaw(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSpace(b.Bytes()), err
}
