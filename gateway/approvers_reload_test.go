package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/testkit"
)

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleSignIn signs in to the console at base with key, in a browser of its own, and reports
// whether it worked; the browser is returned for later requests.
func consoleSignIn(t *testing.T, base, key string) (*http.Client, bool) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := b.Get(base + "/ui/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := consoleCSRF.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", page)
	}
	resp, err = b.PostForm(base+"/ui/signin", url.Values{"csrf": {string(m[1])}, "key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return b, resp.StatusCode == http.StatusSeeOther
}

// signedIn reports whether b's session still opens the approvals page.
func signedIn(t *testing.T, b *http.Client, base string) bool {
	t.Helper()
	resp, err := b.Get(base + "/ui/approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// console.approvers reload like API keys: a new approver signs in at once, a replaced key no longer
// does and the sessions begun with it end, a removed approver's sessions end; the reload is logged
// with the count, and not named in "restart to apply".
func TestReloadConsoleApprovers(t *testing.T) {
	const carolKey, carolNewKey, danKey = "tg_carol_console", "tg_carol_console_2", "tg_dan_console"
	approvers := func(lines ...string) string { return "console:\n  approvers:\n" + strings.Join(lines, "") }
	carol := func(key string) string { return "    - {name: carol, sha256: \"" + authn.HashKey(key) + "\"}\n" }
	dan := "    - {name: dan, sha256: \"" + authn.HashKey(danKey) + "\"}\n"
	path := writeGateway(t, "", approvers(carol(carolKey)))
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	h, err := gw.AdminListenerHandler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	old, ok := consoleSignIn(t, srv.URL, carolKey)
	if !ok {
		t.Fatal("carol cannot sign in")
	}
	if _, ok := consoleSignIn(t, srv.URL, danKey); ok {
		t.Fatal("dan signs in before he is an approver")
	}

	cfg := string(mustRead(t, path))
	write(t, path, strings.Replace(cfg, approvers(carol(carolKey)), approvers(carol(carolNewKey), dan), 1))
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if signedIn(t, old, srv.URL) {
		t.Error("a session begun with carol's replaced key still works")
	}
	if _, ok := consoleSignIn(t, srv.URL, carolKey); ok {
		t.Error("carol's replaced key still signs in")
	}
	danBrowser, ok := consoleSignIn(t, srv.URL, danKey)
	if !ok {
		t.Fatal("dan, added by the reload, cannot sign in")
	}
	if _, ok := consoleSignIn(t, srv.URL, carolNewKey); !ok {
		t.Error("carol's new key does not sign in")
	}
	if strings.Contains(logs.String(), "restart to apply") {
		t.Errorf("console.approvers was named as needing a restart:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `"console_approvers":2`) {
		t.Errorf("the reload does not say how many approvers are in force:\n%s", logs)
	}

	write(t, path, strings.Replace(cfg, approvers(carol(carolKey)), approvers(carol(carolNewKey)), 1))
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if signedIn(t, danBrowser, srv.URL) {
		t.Error("dan's session outlived his removal")
	}
}
