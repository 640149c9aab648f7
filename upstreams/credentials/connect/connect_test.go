package connect

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingFlow is an oauth upstream that records what the pages asked of it.
type recordingFlow struct {
	mu        sync.Mutex
	begun     []string // principals
	completed []string // principal + " " + code
	issuers   []string // the issuer each Complete was given
	fail      error
}

func (f *recordingFlow) Begin(_ context.Context, principal, _ string, seal func(string) string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begun = append(f.begun, principal)
	return "https://as.example.com/authorize?state=" + url.QueryEscape(seal("https://as.example.com")), f.fail
}

func (f *recordingFlow) Complete(_ context.Context, principal, issuer, code, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = append(f.completed, principal+" "+code)
	f.issuers = append(f.issuers, issuer)
	return nil
}

type fixture struct {
	links *Links
	srv   *httptest.Server
	flow  *recordingFlow
	vault *vault.Memory
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{flow: &recordingFlow{}, vault: &vault.Memory{}, now: time.Unix(1_800_000_000, 0)}
	var err error
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.links.Handler().ServeHTTP(w, r) }))
	t.Cleanup(f.srv.Close)
	f.links, err = New(Options{BaseURL: f.srv.URL, OAuth: map[string]Flow{"crm": f.flow}, Secrets: map[string]bool{"tracker": true},
		Vault: f.vault, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func post(t *testing.T, u string, form url.Values, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func linkValues(t *testing.T, link string) url.Values {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// TestOpeningALinkStartsNothing: GET shows the page naming the principal, with the security headers,
// and no authorization request is begun until the button is pressed.
func TestOpeningALinkStartsNothing(t *testing.T) {
	f := newFixture(t)
	resp, page := get(t, f.links.URL("alice", "crm"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "alice") || !strings.Contains(page, `action="authorize"`) {
		t.Fatalf("the page: %d\n%s", resp.StatusCode, page)
	}
	for h, want := range map[string]string{"Content-Security-Policy": "default-src 'none'", "Referrer-Policy": "no-referrer",
		"Cache-Control": "no-store", "X-Frame-Options": "DENY"} {
		if !strings.Contains(resp.Header.Get(h), want) {
			t.Errorf("%s: %q, want %q", h, resp.Header.Get(h), want)
		}
	}
	if len(f.flow.begun) != 0 {
		t.Error("opening the link began an authorization request")
	}
}

// TestTamperedLinksRefused: a link whose principal, upstream or expiry was changed, or that has
// expired, is refused (400) on the page and on the button, and nothing is begun.
func TestTamperedLinksRefused(t *testing.T) {
	f := newFixture(t)
	good := linkValues(t, f.links.URL("alice", "crm"))
	for name, change := range map[string]func(url.Values){
		"another principal": func(v url.Values) { v.Set("p", "mallory") },
		"another upstream":  func(v url.Values) { v.Set("u", "tracker") },
		"a later expiry":    func(v url.Values) { v.Set("e", "9999999999") },
		"another nonce":     func(v url.Values) { v.Set("n", "AAAAAAAAAAAAAAAA") },
		"no nonce":          func(v url.Values) { v.Del("n") },
		"no signature":      func(v url.Values) { v.Del("s") },
		"a short signature": func(v url.Values) { v.Set("s", v.Get("s")[:10]) },
	} {
		v := url.Values{}
		for k, vs := range good {
			v[k] = append([]string(nil), vs...)
		}
		change(v)
		if resp, _ := get(t, f.srv.URL+Prefix+"?"+v.Encode()); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: the page answered %d, want 400", name, resp.StatusCode)
		}
		if resp, _ := post(t, f.srv.URL+Prefix+"authorize", v); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: the button answered %d, want 400", name, resp.StatusCode)
		}
	}
	f.now = f.now.Add(DefaultLinkTTL + time.Second)
	if resp, _ := post(t, f.srv.URL+Prefix+"authorize", good); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an expired link: %d, want 400", resp.StatusCode)
	}
	if len(f.flow.begun) != 0 {
		t.Errorf("a refused link began %v", f.flow.begun)
	}
}

// TestCallbackChecksStateCookieAndExpiry: the button sets a cookie and redirects with a sealed state;
// the callback without the cookie, with a forged state, after the state expired, or a second time is
// refused; once, with both, it completes for the link's principal.
func TestCallbackChecksStateCookieAndExpiry(t *testing.T) {
	f := newFixture(t)
	resp, _ := post(t, f.srv.URL+Prefix+"authorize", linkValues(t, f.links.URL("alice", "crm")))
	to, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || len(resp.Cookies()) != 1 {
		t.Fatalf("the button: %d, Location %q, %d cookies", resp.StatusCode, resp.Header.Get("Location"), len(resp.Cookies()))
	}
	cookie, state := resp.Cookies()[0], to.Query().Get("state")
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || strings.Contains(state, "alice") {
		t.Errorf("cookie %+v; state readable: %v", cookie, strings.Contains(state, "alice"))
	}
	callback := f.srv.URL + Prefix + "callback?code=c0de&state=" + url.QueryEscape(state)
	if resp, _ := get(t, callback); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("without the cookie: %d, want 400", resp.StatusCode)
	}
	forged := f.srv.URL + Prefix + "callback?code=c0de&state=" + url.QueryEscape(otherFirst(state))
	if resp, _ := reqWithCookie(t, forged, cookie); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged state: %d, want 400", resp.StatusCode)
	}
	if resp, page := reqWithCookie(t, callback, cookie); resp.StatusCode != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Errorf("the callback: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := reqWithCookie(t, callback, cookie); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the callback replayed: %d, want 400", resp.StatusCode)
	}
	if len(f.flow.completed) != 1 || f.flow.completed[0] != "alice c0de" || f.flow.issuers[0] != "https://as.example.com" {
		t.Errorf("completed %v at %v, want alice's code once, at the issuer Begin sealed", f.flow.completed, f.flow.issuers)
	}

	resp, _ = post(t, f.srv.URL+Prefix+"authorize", linkValues(t, f.links.URL("bob", "crm")))
	to, _ = url.Parse(resp.Header.Get("Location"))
	f.now = f.now.Add(DefaultStateTTL + time.Second)
	late := f.srv.URL + Prefix + "callback?code=c0de&state=" + url.QueryEscape(to.Query().Get("state"))
	if resp, _ := reqWithCookie(t, late, resp.Cookies()[0]); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an expired state: %d, want 400", resp.StatusCode)
	}
}

// otherFirst changes s's first character, always: the state is random, and one in 64 begins with
// any given character, so a fixed replacement would sometimes forge nothing.
func otherFirst(s string) string {
	if s[0] == 'x' {
		return "y" + s[1:]
	}
	return "x" + s[1:]
}

func reqWithCookie(t *testing.T, u string, c *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.AddCookie(c)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestBeginFailureNamesNoInternals: an authorization server that cannot be used answers 502 with a
// page that says the log has the reason, not the reason.
func TestBeginFailureNamesNoInternals(t *testing.T) {
	f := newFixture(t)
	f.flow.fail = errors.New("dial tcp 10.0.0.7:443: connection refused")
	resp, page := post(t, f.srv.URL+Prefix+"authorize", linkValues(t, f.links.URL("alice", "crm")))
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(page, "10.0.0.7") {
		t.Errorf("%d\n%s", resp.StatusCode, page)
	}
}

// TestSecretForm: a per_user upstream's page takes the user's secret and stores it as theirs (Kind
// Secret, Source user); a secret a header cannot carry, or one for an oauth upstream, is refused.
func TestSecretForm(t *testing.T) {
	f := newFixture(t)
	v := linkValues(t, f.links.URL("alice", "tracker"))
	if _, page := get(t, f.links.URL("alice", "tracker")); !strings.Contains(page, `action="secret"`) || strings.Contains(page, `action="authorize"`) {
		t.Errorf("the per_user page:\n%s", page)
	}
	bad := url.Values{"secret": {"line1\nline2"}}
	for k, vs := range v {
		bad[k] = vs
	}
	if resp, _ := post(t, f.srv.URL+Prefix+"secret", bad); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a secret with a newline: %d, want 400", resp.StatusCode)
	}
	v.Set("secret", "  tk_alice_123  ")
	if resp, page := post(t, f.srv.URL+Prefix+"secret", v); resp.StatusCode != http.StatusOK || strings.Contains(page, "tk_alice") {
		t.Fatalf("storing: %d\n%s", resp.StatusCode, page)
	}
	data, e, err := f.vault.Get(context.Background(), vault.Key{Principal: "alice", Upstream: "tracker", Kind: vault.Secret})
	if err != nil || string(data) != "tk_alice_123" || e.Source != "user" {
		t.Errorf("stored %q (source %q): %v", data, e.Source, err)
	}
	oauth := linkValues(t, f.links.URL("alice", "crm"))
	oauth.Set("secret", "x")
	if resp, _ := post(t, f.srv.URL+Prefix+"secret", oauth); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a secret for an oauth upstream: %d, want 404", resp.StatusCode)
	}
}

// TestConnectLinkReplayedFromATranscriptRefused: a link was good for an hour, as often as anyone
// liked, so whoever read it later (a shared chat transcript, a pasted log) could replace that
// principal's upstream identity: store their own secret as the principal's, or connect their own
// account. A link now starts one authorization or stores one secret; its second use is refused,
// also on another replica sharing the vault, and what the first stored stays.
func TestConnectLinkReplayedFromATranscriptRefused(t *testing.T) {
	f := newFixture(t)
	v := linkValues(t, f.links.URL("alice", "tracker"))
	v.Set("secret", "tk_alice_own")
	if resp, _ := post(t, f.srv.URL+Prefix+"secret", v); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first use: %d", resp.StatusCode)
	}
	v.Set("secret", "tk_mallory")
	if resp, page := post(t, f.srv.URL+Prefix+"secret", v); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Errorf("the same link again: %d\n%s", resp.StatusCode, page)
	}
	if data, _, err := f.vault.Get(context.Background(), vault.Key{Principal: "alice", Upstream: "tracker", Kind: vault.Secret}); err != nil || string(data) != "tk_alice_own" {
		t.Errorf("alice's secret is now %q (%v), want her own", data, err)
	}

	link := linkValues(t, f.links.URL("alice", "crm"))
	if resp, _ := post(t, f.srv.URL+Prefix+"authorize", link); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the first press: %d", resp.StatusCode)
	}
	if resp, _ := post(t, f.srv.URL+Prefix+"authorize", link); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" ||
		len(resp.Cookies()) != 0 {
		t.Errorf("the same link pressed again: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Another replica (its own Links, the same key and vault) refuses it too.
	other, err := New(Options{BaseURL: f.srv.URL, Key: []byte(strings.Repeat("k", 32)), OAuth: map[string]Flow{"crm": f.flow},
		Vault: f.vault, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := New(Options{BaseURL: f.srv.URL, Key: []byte(strings.Repeat("k", 32)), OAuth: map[string]Flow{"crm": f.flow},
		Vault: f.vault, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	shared := mine.URL("bob", "crm")
	for i, l := range []*Links{mine, other} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, Prefix+"authorize", strings.NewReader(linkValues(t, shared).Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		l.Handler().ServeHTTP(rec, req)
		if want := []int{http.StatusSeeOther, http.StatusBadRequest}[i]; rec.Code != want {
			t.Errorf("replica %d: %d, want %d", i, rec.Code, want)
		}
	}
}

// TestLinkStoreDownRefusesTheLink: when the used-link store fails, nothing is started or stored.
func TestLinkStoreDownRefusesTheLink(t *testing.T) {
	f := newFixture(t)
	l, err := New(Options{BaseURL: f.srv.URL, OAuth: map[string]Flow{"crm": f.flow}, Once: failingOnce{}, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, Prefix+"authorize", strings.NewReader(linkValues(t, l.URL("alice", "crm")).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	l.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Location") != "" {
		t.Errorf("with the store down: %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
}

type failingOnce struct{}

func (failingOnce) TakeOnce(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("redis: connection refused")
}
