package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testoidc"
)

// plainHTTP serves r to c as a TLS-terminating proxy hands it on: in plain HTTP (r.TLS nil), with the
// cookies given, and returns what the console set.
func plainHTTP(t *testing.T, c *Console, method, target string, form url.Values, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	var r *http.Request
	if form != nil {
		r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	for _, ck := range cookies {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w.Result()
}

// cookie is the cookie name that resp sets, or fails.
func cookie(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, ck := range resp.Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	t.Fatalf("no %s cookie set (status %d, cookies %v)", name, resp.StatusCode, resp.Cookies())
	return nil
}

// The attack: behind a proxy that terminates TLS, the gateway sees plain HTTP and set the session
// cookie without Secure, so the browser would also send it on any http:// request to the console's
// host (a link or redirect an attacker on the network plants, answered by them): the session taken.
// An https console.public_url makes every cookie Secure (sign-in form, session, sign-out), whatever
// scheme the request arrived in.
func TestSessionCookieSecureBehindTLSProxy(t *testing.T) {
	f := newFixture(t)
	o := f.console.o
	o.PublicURL = "https://toolgate-admin.example.com"
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	form := plainHTTP(t, c, http.MethodGet, "/ui/signin", nil)
	body := new(strings.Builder)
	_, _ = io.Copy(body, form.Body)
	pre := cookie(t, form, signinCookie)
	signedIn := plainHTTP(t, c, http.MethodPost, "/ui/signin", url.Values{"csrf": {csrf(t, body.String())}, "key": {carolKey}}, pre)
	session := cookie(t, signedIn, sessionCookie)
	if signedIn.StatusCode != http.StatusSeeOther || session.Value == "" {
		t.Fatalf("sign-in: %d, session cookie %+v", signedIn.StatusCode, session)
	}
	page := plainHTTP(t, c, http.MethodGet, "/ui/approvals", nil, session)
	body.Reset()
	_, _ = io.Copy(body, page.Body)
	out := plainHTTP(t, c, http.MethodPost, "/ui/signout", url.Values{"csrf": {csrf(t, body.String())}}, session)
	for _, ck := range []*http.Cookie{pre, session, cookie(t, out, sessionCookie)} {
		if !ck.Secure || !ck.HttpOnly {
			t.Errorf("cookie %+v: want Secure and HttpOnly behind a TLS proxy", ck)
		}
	}
}

// The same with OIDC sign-in and no public_url: an https redirect_url says approvers reach the
// console over TLS, so the pre-session cookie and the sign-in flow's cookie are Secure too.
func TestOIDCCookieSecureBehindTLSProxy(t *testing.T) {
	f := newFixture(t)
	op := testoidc.Start(t)
	o := f.console.o
	o.OIDC = &OIDC{Issuer: op.Issuer(), ClientID: testoidc.ClientID, ClientSecret: testoidc.ClientSecret,
		RedirectURL: "https://toolgate-admin.example.com/ui/oidc/callback"}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range []*http.Cookie{cookie(t, plainHTTP(t, c, http.MethodGet, "/ui/signin", nil), signinCookie),
		cookie(t, plainHTTP(t, c, http.MethodGet, "/ui/oidc/start", nil), oidcCookie)} {
		if !ck.Secure {
			t.Errorf("cookie %+v: want Secure with an https redirect_url", ck)
		}
	}
}

// Without an https address the rule is the request's: plain HTTP on loopback (a console reached at
// http://127.0.0.1) keeps cookies the browser will send back there.
func TestCookieNotSecureOnPlainLoopback(t *testing.T) {
	f := newFixture(t)
	o := f.console.o
	o.PublicURL = "http://127.0.0.1:9090"
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if ck := cookie(t, plainHTTP(t, c, http.MethodGet, "/ui/signin", nil), signinCookie); ck.Secure {
		t.Errorf("cookie %+v: Secure on a plain-HTTP console", ck)
	}
}
