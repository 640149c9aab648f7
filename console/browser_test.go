package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/demo/orders"
	"github.com/toolgate/toolgate/gateway"
)

// The demo's API keys (README) and the console keys of this test.
const (
	aliceAPIKey = "tg_demo_alice_support"
	adminKey    = "tg_admin_browser_test"
	carolSignIn = "tga_carol_browser_test"
	bobSignIn   = "tga_bob_browser_test"
)

// The demo's example approval rule, made active: a support agent's refund above 50 waits for a human.
const heldRefunds = "a, support_agent, orders/refund_order, call, amount > 50\n"

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// chromium finds the browser, or skips (fails with TOOLGATE_REQUIRE_CHROMIUM=1, as in CI).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TOOLGATE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH, and TOOLGATE_REQUIRE_CHROMIUM=1")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); set TOOLGATE_REQUIRE_CHROMIUM=1 to make this a failure")
	return ""
}

// browser starts headless Chromium (found by chromium) for ctx, width×height. Its TMPDIR is the
// test's: Chromium leaves its singleton socket's folder (/tmp/org.chromium.Chromium.*) behind on
// every run, and CI machines are shared.
func browser(t *testing.T, ctx context.Context, width, height int) (context.Context, context.CancelFunc) {
	t.Helper()
	return chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(width, height),
		chromedp.Env("TMPDIR="+t.TempDir()))...)
}

// countRefunds counts the refund_order calls that reach the upstream.
func countRefunds(next http.Handler, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "refund_order" {
				n.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// startDemo is the demo gateway (the demo's model, policy and keys, its orders server in process,
// counted) with the demo's example approval rule active and carol (a supervisor) and bob (a viewer)
// as the console's approvers, every listener on a free port.
func startDemo(t *testing.T) (gw *gateway.Gateway, dir string, refunds *atomic.Int32) {
	t.Helper()
	refunds = new(atomic.Int32)
	up := server.NewStreamableHTTPServer(orders.NewServer())
	ts := httptest.NewServer(countRefunds(up, refunds))
	t.Cleanup(ts.Close)

	dir = t.TempDir()
	for _, f := range []string{"model.conf", "policy.csv"} {
		data, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "policy.csv" {
			data = append(data, heldRefunds...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", key_sha256: %q}
authz: {model: model.conf, policy: policy.csv}
auth:
  stdio_principal: local
  api_keys:
    - {principal: alice, sha256: %q}
mcpServers:
  orders:
    url: %q
    egress: {allow: [loopback]}   # the test upstream listens on loopback
console:
  approvers:
    - {name: carol, sha256: %q}
    - {name: bob, sha256: %q}
`, sha(adminKey), sha(aliceAPIKey), ts.URL+"/mcp", sha(carolSignIn), sha(bobSignIn))
	path := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gw, err := gateway.New(ctx, gateway.Options{ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return gw, dir, refunds
}

// mcpClient is a real mcp-go client of the gateway, as alice.
func mcpClient(t *testing.T, gw *gateway.Gateway) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP("http://"+gw.Addr()+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceAPIKey}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "browser-test", Version: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

func refund(t *testing.T, c *client.Client, args map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "orders__refund_order"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	env, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structuredContent is %T", res.StructuredContent)
	}
	return env
}

var requestID = regexp.MustCompile(`apr_[A-Za-z0-9_-]{22}`)

func held(t *testing.T, env map[string]any) string {
	t.Helper()
	id := requestID.FindString(fmt.Sprint(env["message"]))
	if env["error_code"] != "approval_required" || id == "" {
		t.Fatalf("want approval_required naming a request, got %v", env)
	}
	return id
}

// TestBrowserApprovesARefund: a real MCP client's refund is held; in headless Chromium carol (a
// supervisor) signs in, sees it with its arguments as text, approves it, and the client's retry
// runs exactly once; her form without its CSRF token is refused; bob (a viewer, no approve line) is
// refused; nothing refused is decided.
func TestBrowserApprovesARefund(t *testing.T) {
	chromium(t) // skips now, before the gateway starts, when there is no browser
	gw, dir, refunds := startDemo(t)
	mc := mcpClient(t, gw)
	admin := &approvals.Client{URL: "http://" + gw.AdminAddr(), Key: adminKey}
	ui := "http://" + gw.AdminAddr() + "/ui/"

	const script = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	args := map[string]any{"order_id": 4821, "amount": 80, "reason": "damaged in transit " + script}
	id := held(t, refund(t, mc, args))
	if refunds.Load() != 0 {
		t.Fatal("a held refund reached the upstream")
	}

	shots := t.ArtifactDir()
	t.Logf("screenshots in %s", shots)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, cancelAlloc := browser(t, ctx, 900, 1000)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	var dialogs atomic.Int32
	if err := chromedp.Listen(bctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "approvals.png" {
			if out := os.Getenv("TOOLGATE_CONSOLE_SCREENSHOT"); out != "" {
				_ = os.WriteFile(out, png, 0o644)
			}
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	// waitFor waits a few seconds for sel, and says what the page shows when it does not come.
	waitFor := func(sel string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			loc, _ := chromedp.Run(bctx, chromedp.Location())
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s did not appear (%v); the browser is at %s showing:\n%s", sel, err, loc, html)
		}
	}
	signIn := func(key string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.Navigate(ui),
			chromedp.WaitVisible(chromedp.CSS("#key")),
			chromedp.SendKeys(chromedp.CSS("#key"), key),
		); err != nil {
			t.Fatal(err)
		}
		// The sign-in page has an h1 too: wait for the page the sign-in opens.
		if u := load(t, bctx, chromedp.Click(chromedp.CSS("form.signin button"))); !strings.HasSuffix(u, "/ui/approvals") {
			t.Fatalf("signing in opened %s", u)
		}
	}

	// Nothing without signing in: /ui/ goes to the sign-in page.
	if err := chromedp.Do(bctx, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS("#key"))); err != nil {
		t.Fatal(err)
	}
	shot("signin.png")

	// carol signs in and sees the held refund, its arguments as text.
	signIn(carolSignIn)
	waitFor("#" + id)
	shot("approvals.png")
	shown := text("#" + id + " pre.args")
	if !strings.Contains(shown, script) || !strings.Contains(shown, `"amount": 80`) {
		t.Errorf("the arguments shown are %q, want the script as text and the amount", shown)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int]("document.scripts.length")); err != nil || n != 0 {
		t.Errorf("the page has %d script elements (%v), want none", n, err)
	}
	if who := text("#" + id + " .principal"); who != "alice" {
		t.Errorf("principal shown %q", who)
	}
	if rule := text("#" + id + " .rule"); rule != strings.TrimSpace(heldRefunds) {
		t.Errorf("rule shown %q, want %q", rule, heldRefunds)
	}

	// Her form without its CSRF token is refused, though she may approve: nothing is decided.
	strip := fmt.Sprintf(`document.querySelector("#%s input[name=csrf]").remove()`, id)
	load(t, bctx, chromedp.Evaluate[chromedp.Void](strip), chromedp.Click(chromedp.CSS("#"+id+" button[value=approve]")))
	if msg := text("main"); !strings.Contains(msg, "security token is missing or wrong") || !strings.Contains(msg, "nothing was done") {
		t.Errorf("a form without its CSRF token got %q", msg)
	}
	shot("csrf-refused.png")
	if reqs, err := admin.List(context.Background()); err != nil || len(reqs) != 1 || reqs[0].ID != id || reqs[0].State != approvals.StatePending {
		t.Fatalf("after the form without a token the store lists %+v (%v), want %s pending", reqs, err, id)
	}
	load(t, bctx, chromedp.Click(chromedp.CSS(`a[href="/ui/approvals"]`)))

	// She approves it.
	load(t, bctx, chromedp.Click(chromedp.CSS("#"+id+" button[value=approve]")))
	waitFor(".flash.notice")
	if notice := text(".flash.notice"); !strings.Contains(notice, "You approved alice's call of orders/refund_order") {
		t.Errorf("notice %q", notice)
	}
	shot("decided.png")

	// The client's retry runs exactly once; a third identical call needs a new approval.
	if env := refund(t, mc, args); env["ok"] != true {
		t.Fatalf("the approved retry: %v", env)
	}
	if next := held(t, refund(t, mc, args)); next == id {
		t.Fatal("the approval was used twice")
	}
	if n := refunds.Load(); n != 1 {
		t.Fatalf("the upstream ran refund_order %d times, want 1", n)
	}

	// bob, a viewer, signs in after carol signs out: he may decide nothing.
	other := held(t, refund(t, mc, map[string]any{"order_id": 4822, "amount": 60, "reason": "late"}))
	load(t, bctx, chromedp.Click(chromedp.CSS("form.signout button")))
	waitFor("#key")
	signIn(bobSignIn)
	waitFor("#" + other)
	if why := text("#" + other + " .whynot"); !strings.Contains(why, "The policy does not let you approve orders/refund_order") {
		t.Errorf("bob's page says %q", why)
	}
	shot("not-allowed.png")
	// The page offers him no button; a form posted anyway (with his session's token) is refused.
	force := fmt.Sprintf(`(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = "/ui/approvals/%s";
		for (const [n, v] of [["csrf", document.querySelector("input[name=csrf]").value], ["decision", "approve"]]) {
			const i = document.createElement("input"); i.type = "hidden"; i.name = n; i.value = v; f.appendChild(i);
		}
		document.body.appendChild(f); f.submit(); return true;
	})()`, other)
	load(t, bctx, chromedp.Evaluate[chromedp.Void](force))
	waitFor(".flash.error")
	if msg := text(".flash.error"); !strings.Contains(msg, "does not let you approve") || !strings.Contains(msg, "Nothing was decided") {
		t.Errorf("bob's refusal says %q", msg)
	}
	shot("refused.png")
	t.Logf("browser part: %s", time.Since(started).Round(time.Millisecond))

	// The store agrees: the first used once, approved by carol; the second still pending.
	for _, want := range []struct {
		id, state, by string
	}{{id, "used", "carol"}, {other, "pending", ""}} {
		reqs, err := admin.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range reqs {
			if r.ID == want.id {
				found = true
				if string(r.State) != want.state || r.DecidedBy != want.by {
					t.Errorf("request %s: %s by %q, want %s by %q", r.ID, r.State, r.DecidedBy, want.state, want.by)
				}
			}
		}
		if !found {
			t.Errorf("request %s not listed", want.id)
		}
	}
	if dialogs.Load() != 0 {
		t.Errorf("%d JavaScript dialogs opened: a script from the arguments ran", dialogs.Load())
	}

	// The audit trail records the approval under carol's name.
	trail, err := os.ReadFile(filepath.Join(dir, "toolgate.audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	var approval map[string]any
	for line := range strings.SplitSeq(string(trail), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["kind"] == "approval" {
			approval = rec
		}
	}
	if approval == nil || approval["principal"] != "carol" || !strings.Contains(fmt.Sprint(approval["details"]), id) {
		t.Errorf("the audit trail's approval record is %v, want carol's approval of %s", approval, id)
	}
}
