package connect_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/upstreams/credentials/connect"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// flow counts the authorization requests begun; it never reaches a server.
type flow struct{ begun int }

func (f *flow) Begin(context.Context, string, string, func(string) string) (string, error) {
	f.begun++
	return "https://as.example/authorize?x=1", nil
}
func (f *flow) Complete(context.Context, string, string, string, string) error {
	return errors.New("not used")
}

// TestCrossSiteConnectFormRefused: the connect forms post the link's fields, which whoever holds a
// link knows. A page of another site could post mallory's link from a victim's browser: the
// authorization request then ran in the victim's browser, where a session at the authorization
// server (and consent already given to the gateway's client, which every user shares) sent the code
// back at once, and the victim's token was stored as mallory's. mallory's calls then acted as the
// victim. A form posted from another site (Sec-Fetch-Site, else Origin) is refused before anything
// starts or is stored; the page's own form still works.
func TestCrossSiteConnectFormRefused(t *testing.T) {
	f := &flow{}
	v := &vault.Memory{}
	l, err := connect.New(connect.Options{BaseURL: "https://gw.example", OAuth: map[string]connect.Flow{"crm": f},
		Secrets: map[string]bool{"tracker": true}, Vault: v})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string, link string, extra url.Values, hdr map[string]string) *httptest.ResponseRecorder {
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		form := u.Query()
		for k, vs := range extra {
			form[k] = vs
		}
		r := httptest.NewRequest(http.MethodPost, "https://gw.example"+connect.Prefix+path, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		l.Handler().ServeHTTP(w, r)
		return w
	}
	crossSite := []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "https://evil.gw.example"},
		{"Origin": "https://evil.example"}, // a browser that does not send Sec-Fetch-Site
	}
	for _, hdr := range crossSite {
		if w := post("authorize", l.URL("mallory", "crm"), nil, hdr); w.Code != http.StatusForbidden || w.Header().Get("Location") != "" {
			t.Errorf("authorize posted with %v: %d (Location %q), want 403 and no redirect", hdr, w.Code, w.Header().Get("Location"))
		}
		if w := post("secret", l.URL("mallory", "tracker"), url.Values{"secret": {"victims-key"}}, hdr); w.Code != http.StatusForbidden {
			t.Errorf("secret posted with %v: %d, want 403", hdr, w.Code)
		}
	}
	if f.begun != 0 {
		t.Fatalf("%d authorization requests begun by cross-site posts", f.begun)
	}
	if es, _ := v.List(context.Background(), vault.Filter{}); len(es) != 0 {
		t.Fatalf("a cross-site post stored a secret: %v", es)
	}
	// The page's own forms: same-origin, or Origin "null" (what a browser sends under the pages'
	// Referrer-Policy: no-referrer), or a client that sends neither header.
	for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, {"Origin": "https://gw.example"}, {}} {
		if w := post("authorize", l.URL("alice", "crm"), nil, hdr); w.Code != http.StatusSeeOther {
			t.Errorf("the page's own authorize with %v: %d, want 303 to the authorization server", hdr, w.Code)
		}
	}
	if w := post("secret", l.URL("alice", "tracker"), url.Values{"secret": {"alices-key"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}); w.Code != http.StatusOK {
		t.Errorf("the page's own secret form: %d", w.Code)
	}
}
