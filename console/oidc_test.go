package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/testoidc"
)

// oidcFixture is the console with OIDC sign-in against a real provider (internal/testoidc): erin
// signs in there only (no key), carol with her key; mallory has an account at the provider but is
// no approver.
type oidcFixture struct {
	*fixture
	op *testoidc.Provider
}

func newOIDCFixture(t *testing.T, claim string, people ...testoidc.User) *oidcFixture {
	t.Helper()
	if people == nil {
		people = []testoidc.User{{ID: "u-erin", Username: "erin", Email: "erin@example.com", EmailVerified: true},
			{ID: "u-mallory", Username: "mallory", Email: "mallory@example.com", EmailVerified: true}}
	}
	f := &oidcFixture{fixture: newFixture(t), op: testoidc.Start(t, people...)}
	var c *Console
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	o := f.console.o
	o.Approvers = append(o.Approvers, Approver{Name: "erin"})
	o.OIDC = &OIDC{Issuer: f.op.Issuer(), ClientID: testoidc.ClientID, ClientSecret: testoidc.ClientSecret,
		RedirectURL: srv.URL + "/ui/oidc/callback", PrincipalClaim: claim}
	var err error
	if c, err = New(o); err != nil {
		t.Fatal(err)
	}
	f.console, f.srv = c, srv
	return f
}

var loginID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// atProvider follows the console's redirect to the provider, signs in there as username, and
// returns the provider's redirect back to the console (the callback URL with code and state).
func (f *oidcFixture) atProvider(to, username string) *url.URL {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	person := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == "/ui/oidc/callback" {
			return http.ErrUseLastResponse // back at the console: the test's browser takes it from here
		}
		return nil
	}}
	resp, err := person.Get(to)
	if err != nil {
		f.t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := loginID.FindSubmatch(page)
	if m == nil {
		f.t.Fatalf("no login form at the provider (%d):\n%s", resp.StatusCode, page)
	}
	resp, err = person.PostForm(f.op.Issuer()+"/login/username", url.Values{"id": {string(m[1])}, "username": {username}, "password": {testoidc.Password}})
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	back, err := resp.Location()
	if err != nil || back.Path != "/ui/oidc/callback" {
		f.t.Fatalf("the provider did not send the browser back to the console: %d %v", resp.StatusCode, err)
	}
	return back
}

// start begins a sign-in in b and returns where the console sends the browser.
func (b *browser) startOIDC() *url.URL {
	b.t.Helper()
	a := b.get("/ui/oidc/start")
	to, err := a.Location()
	if a.StatusCode != http.StatusFound || err != nil {
		b.t.Fatalf("start: %d %v %s", a.StatusCode, err, a.body)
	}
	return to
}

func TestOIDCSignIn(t *testing.T) {
	f := newOIDCFixture(t, "preferred_username")
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	if page := b.get("/ui/signin").body; !strings.Contains(page, `href="/ui/oidc/start"`) || !strings.Contains(page, "Sign in with 127.0.0.1:") {
		t.Fatalf("the sign-in page offers no OIDC sign-in:\n%s", page)
	}
	to := b.startOIDC()
	q := to.Query()
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 || q.Get("state") == "" || q.Get("nonce") == "" ||
		q.Get("response_type") != "code" || q.Get("client_id") != testoidc.ClientID {
		t.Fatalf("the authorization request lacks PKCE, state or nonce: %s", to)
	}
	back := f.atProvider(to.String(), "erin")
	a := b.get(back.RequestURI())
	if a.StatusCode != http.StatusOK || !strings.Contains(a.body, `http-equiv="refresh" content="0;url=/ui/approvals"`) || !strings.Contains(a.body, "erin") {
		t.Fatalf("callback: %d\n%s", a.StatusCode, a.body)
	}
	if strings.Contains(a.body, "<script") {
		t.Fatal("the signed-in page runs script; the CSP forbids inline script")
	}
	page := b.get("/ui/approvals")
	if page.StatusCode != http.StatusOK || !strings.Contains(page.body, `<span class="who">erin</span>`) {
		t.Fatalf("after the sign-in: %d", page.StatusCode)
	}
	// The same code and state again: the flow was used up.
	if a := b.get(back.RequestURI()); a.StatusCode != http.StatusBadRequest {
		t.Errorf("a replayed callback: %d", a.StatusCode)
	}
	// erin has no approve line in the test policy: the decision is refused under her name, and a
	// decision is asked about under the name the provider gave.
	a = b.post("/ui/approvals/"+req.ID, url.Values{"csrf": {csrf(t, page.body)}, "decision": {"approve"}})
	if a.StatusCode != http.StatusForbidden || f.state(req.ID).State != approvals.StatePending {
		t.Fatalf("erin's approval: %d, request %s", a.StatusCode, f.state(req.ID).State)
	}
	if f.op.TokenRequests() != 1 {
		t.Errorf("token requests: %d, want 1", f.op.TokenRequests())
	}
}

// Decisions made after an OIDC sign-in are recorded under the name the provider gave.
func TestOIDCDecisionUnderThatIdentity(t *testing.T) {
	// carol, a supervisor, signs in at the provider, whose email claim names her as the console does.
	f := newOIDCFixture(t, "email", testoidc.User{ID: "u-carol", Username: "carol.s", Email: "carol", EmailVerified: true})
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	back := f.atProvider(b.startOIDC().String(), "carol.s")
	if a := b.get(back.RequestURI()); a.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", a.StatusCode, a.body)
	}
	page := b.get("/ui/approvals").body
	a := b.post("/ui/approvals/"+req.ID, url.Values{"csrf": {csrf(t, page)}, "decision": {"approve"}})
	if a.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", a.StatusCode, a.body)
	}
	if got := f.state(req.ID); got.State != approvals.StateApproved || got.DecidedBy != "carol" {
		t.Fatalf("decided %s by %q, want approved by carol", got.State, got.DecidedBy)
	}
}

func TestOIDCRefusals(t *testing.T) {
	f := newOIDCFixture(t, "preferred_username")
	t.Run("not an approver", func(t *testing.T) {
		b := f.browser()
		back := f.atProvider(b.startOIDC().String(), "mallory")
		a := b.get(back.RequestURI())
		if a.StatusCode != http.StatusForbidden || !strings.Contains(a.body, "mallory, who is not a console approver") {
			t.Fatalf("mallory: %d %s", a.StatusCode, a.body)
		}
		if b.get("/ui/approvals").StatusCode != http.StatusSeeOther {
			t.Fatal("mallory has a session")
		}
	})
	t.Run("wrong state", func(t *testing.T) {
		b := f.browser()
		back := f.atProvider(b.startOIDC().String(), "erin")
		q := back.Query()
		q.Set("state", q.Get("state")+"x")
		if a := b.get("/ui/oidc/callback?" + q.Encode()); a.StatusCode != http.StatusBadRequest {
			t.Fatalf("a wrong state: %d", a.StatusCode)
		}
		if b.get("/ui/approvals").StatusCode != http.StatusSeeOther {
			t.Fatal("a wrong state signed in")
		}
	})
	t.Run("another browser's answer", func(t *testing.T) {
		// The provider's answer for a flow started in one browser, delivered to another (login CSRF).
		victim, attacker := f.browser(), f.browser()
		back := f.atProvider(attacker.startOIDC().String(), "erin")
		if a := victim.get(back.RequestURI()); a.StatusCode != http.StatusBadRequest {
			t.Fatalf("a callback without the flow's cookie: %d", a.StatusCode)
		}
	})
	t.Run("the provider refuses", func(t *testing.T) {
		b := f.browser()
		state := b.startOIDC().Query().Get("state")
		a := b.get("/ui/oidc/callback?error=access_denied&state=" + url.QueryEscape(state) + "&error_description=%3Cscript%3E")
		if a.StatusCode != http.StatusUnauthorized || !strings.Contains(a.body, "(access_denied)") || strings.Contains(a.body, "<script>") {
			t.Fatalf("a refusal: %d %s", a.StatusCode, a.body)
		}
	})
	t.Run("a forged code", func(t *testing.T) {
		b := f.browser()
		state := b.startOIDC().Query().Get("state")
		if a := b.get("/ui/oidc/callback?code=forged&state=" + url.QueryEscape(state)); a.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forged code: %d", a.StatusCode)
		}
	})
}

func TestOIDCProviderDown(t *testing.T) {
	f := newFixture(t)
	o := f.console.o
	o.OIDC = &OIDC{Issuer: "http://127.0.0.1:1", ClientID: "x", RedirectURL: f.srv.URL + "/ui/oidc/callback"}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/oidc/start", nil))
	if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "cannot be reached") {
		t.Fatalf("provider down: %d %s", w.Code, w.Body.String())
	}
}

func TestPrincipalFromClaims(t *testing.T) {
	for _, tt := range []struct {
		claims map[string]any
		claim  string
		want   string
	}{
		{map[string]any{"sub": "u-1"}, "sub", "u-1"},
		{map[string]any{"email": "e@x", "email_verified": true}, "email", "e@x"},
		{map[string]any{"email": "e@x"}, "email", "e@x"}, // no verification claim: the provider vouches by issuing it
		{map[string]any{"email": "e@x", "email_verified": false}, "email", ""},
		{map[string]any{"groups": []any{"a"}}, "groups", ""},
		{map[string]any{}, "preferred_username", ""},
	} {
		got, err := principalFrom(tt.claims, tt.claim)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("principalFrom(%v, %s) = %q, %v; want %q", tt.claims, tt.claim, got, err, tt.want)
		}
	}
}

// TestOIDCUnverifiedEmailAsStringRefused: some providers (Amazon Cognito's UserInfo, for one) send
// email_verified as the string "false". Read as "not a boolean, so not said", it let anyone who typed
// an approver's address into an account at the provider sign in as that approver.
func TestOIDCUnverifiedEmailAsStringRefused(t *testing.T) {
	for _, v := range []any{"false", "False", "", "no", float64(0), nil} {
		claims := map[string]any{"email": "carol@example.com", "email_verified": v}
		if got, err := principalFrom(claims, "email"); err == nil || got != "" {
			t.Errorf("email_verified %#v: signed in as %q; want the sign-in refused", v, got)
		} else if !strings.Contains(err.Error(), "not verified") {
			t.Errorf("email_verified %#v: error %q does not say the email is not verified", v, err)
		}
	}
	for _, v := range []any{true, "true", "TRUE"} {
		claims := map[string]any{"email": "carol@example.com", "email_verified": v}
		if got, err := principalFrom(claims, "email"); err != nil || got != "carol@example.com" {
			t.Errorf("email_verified %#v: %q, %v; want carol@example.com", v, got, err)
		}
	}
}

// TestOIDCStartFloodDoesNotLockOutSignIn: /ui/oidc/start needs no session, and each request used to
// keep a flow in memory, refusing new sign-ins past 10,000 for ten minutes. Anyone who could reach
// the console could so keep every approver who signs in through the provider out, and the calls
// waiting for them would expire undecided.
func TestOIDCStartFloodDoesNotLockOutSignIn(t *testing.T) {
	f := newOIDCFixture(t, "preferred_username")
	for i := range 10_001 {
		w := httptest.NewRecorder()
		f.console.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/oidc/start", nil))
		if w.Code != http.StatusFound {
			t.Fatalf("start %d: %d %s", i+1, w.Code, w.Body.String())
		}
	}
	b := f.browser()
	back := f.atProvider(b.startOIDC().String(), "erin")
	if a := b.get(back.RequestURI()); a.StatusCode != http.StatusOK {
		t.Fatalf("erin's sign-in after the flood: %d %s", a.StatusCode, a.body)
	}
	if b.get("/ui/approvals").StatusCode != http.StatusOK {
		t.Fatal("erin has no session after signing in")
	}
}

// TestOIDCCallbackOnAnotherReplica: behind one origin, the provider's answer may reach another replica
// than the one the sign-in started on (sessions are shared through Redis for this); the flow must
// not live in one replica's memory.
func TestOIDCCallbackOnAnotherReplica(t *testing.T) {
	f := newOIDCFixture(t, "preferred_username")
	other, err := New(f.console.o) // the same settings and sessions store, another process's memory
	if err != nil {
		t.Fatal(err)
	}
	otherSrv := httptest.NewServer(other)
	t.Cleanup(otherSrv.Close)
	b := f.browser()
	back := f.atProvider(b.startOIDC().String(), "erin")
	// The same browser (its cookies are the host's, whatever the port) reaches the other replica.
	atOther := &browser{t: t, f: &fixture{t: t, console: other, srv: otherSrv}, http: b.http}
	if a := atOther.get(back.RequestURI()); a.StatusCode != http.StatusOK {
		t.Fatalf("the callback on the other replica: %d %s", a.StatusCode, a.body)
	}
	if b.get("/ui/approvals").StatusCode != http.StatusOK {
		t.Fatal("no session after a sign-in answered by the other replica")
	}
}
