package authn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// noKIDRateLimit lets every unknown kid refresh, for tests that need two refreshes in a row.
func noKIDRateLimit(s *settings) { s.kidRefreshEvery = 0 }

func newEdKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// eventually polls cond for up to 5s; it is for background refreshes, whose timing tests do not control.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUnknownKIDRotation: the IdP rotates in a new key; the first token signed with it causes one
// refresh and is accepted; later ones cause none.
func TestUnknownKIDRotation(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	ed2 := newEdKey(t)
	srv.serve(t, append(defaultJWKS(), jwk{kid: "ed-2", alg: jwkset.AlgEdDSA, key: ed2.Public()}))
	token := sign(t, jwt.SigningMethodEdDSA, ed2, "ed-2", claims(nil), nil)
	for i := range 3 {
		if sub, err := a.Authenticate(request("", bearer(token))); err != nil || sub.Principal != "alice" {
			t.Fatalf("attempt %d: %+v, %v", i, sub, err)
		}
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("fetched %d times, want 2 (start, then one refresh for the new kid)", n)
	}
}

// TestUnknownKIDBounded: a flood of tokens with made-up kids refreshes the key set at most once per
// interval, fails fast, and leaves known kids working.
func TestUnknownKIDBounded(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	tokens := make([]string, 43)
	for i := range tokens {
		tokens[i] = sign(t, jwt.SigningMethodRS256, keys().rsa, fmt.Sprintf("ghost-%d", i), claims(nil), nil)
	}
	// Requests are cancelled after 2s but carry no deadline, like a real request whose client gives up:
	// a regression that makes them queue for the rate limiter shows as slowness, without hanging the run.
	bounded := func(token string) *http.Request {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(2*time.Second, cancel)
		t.Cleanup(func() { stop.Stop(); cancel() })
		return request("", bearer(token)).WithContext(ctx)
	}
	start := time.Now()
	var wg sync.WaitGroup
	accepted := make(chan string, len(tokens))
	for _, token := range tokens[:40] {
		wg.Go(func() {
			if _, err := a.Authenticate(bounded(token)); err == nil {
				accepted <- token
			}
		})
	}
	wg.Wait()
	for _, token := range tokens[40:] { // and sequentially
		_, err := a.Authenticate(bounded(token))
		if f := failure(t, err); !strings.Contains(f.Reason, "jwt: token is unverifiable") {
			t.Fatalf("reason %q", f.Reason)
		}
	}
	elapsed := time.Since(start)
	close(accepted)
	if len(accepted) > 0 {
		t.Fatalf("%d tokens with unknown kids accepted", len(accepted))
	}
	if n := srv.fetches.Load(); n > 2 {
		t.Fatalf("fetched %d times, want at most 2 (start, one refresh)", n)
	}
	if elapsed > 1500*time.Millisecond {
		t.Errorf("refusing %d unknown kids took %v: requests waited for the rate limiter", len(tokens), elapsed)
	}
	if _, err := a.Authenticate(request("", bearer(rs256(t, nil)))); err != nil {
		t.Fatalf("known kid refused after the flood: %v", err)
	}
}

// TestJWKSUnreachableAtStartup: the gateway starts without the key set, says so, refuses tokens, and
// accepts them once the key set can be fetched.
func TestJWKSUnreachableAtStartup(t *testing.T) {
	t.Run("server error", func(t *testing.T) {
		srv := newJWKSServer(t, defaultJWKS())
		srv.status.Store(http.StatusServiceUnavailable)
		a, logs := newAuth(t, jwtOptions(srv.URL, nil), noKIDRateLimit)
		for _, want := range []string{"no JWT signing keys loaded yet", "cannot fetch the JWT signing keys", srv.URL} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
		token := rs256(t, nil)
		_, err := a.Authenticate(request("", bearer(token)))
		if f := failure(t, err); !strings.Contains(f.Reason, `key not found "rsa-1"`) {
			t.Fatalf("reason %q", f.Reason)
		}
		srv.status.Store(0)
		if _, err := a.Authenticate(request("", bearer(token))); err != nil {
			t.Fatalf("refused once the key set is reachable: %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		start := time.Now()
		a, logs := newAuth(t, jwtOptions(closed.URL, nil))
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("New took %v with the key set unreachable", d)
		}
		if !strings.Contains(logs.String(), "connection refused") {
			t.Errorf("log lacks the cause:\n%s", logs)
		}
		if _, err := a.Authenticate(request("", bearer(rs256(t, nil)))); err == nil {
			t.Fatal("accepted a token without keys")
		}
		if _, err := a.Authenticate(request("", bearer(aliceKey))); err != nil {
			t.Fatalf("API keys must work while the key set is unreachable: %v", err)
		}
	})
}

// TestPeriodicRefreshAndClose: the key set is refreshed on its interval, and Close stops that.
func TestPeriodicRefreshAndClose(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	// Options built in code skip config's 1m minimum, so the refresh comes quickly.
	a, _ := newAuth(t, jwtOptions(srv.URL, func(o *Options) { o.JWT.Refresh = 10 * time.Millisecond }))
	eventually(t, "two periodic refreshes", func() bool { return srv.fetches.Load() >= 3 })
	a.Close()
	a.Close() // idempotent
	stopped := srv.fetches.Load()
	time.Sleep(50 * time.Millisecond)
	if n := srv.fetches.Load(); n > stopped+1 { // one may have been in flight
		t.Fatalf("still refreshing after Close: %d fetches, then %d", stopped, n)
	}
}

// TestJWKSBodyCap: an oversized key set document is refused, not buffered.
func TestJWKSBodyCap(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", maxJWKSBytes) + `"}`))
	}))
	t.Cleanup(big.Close)
	_, logs := newAuth(t, jwtOptions(big.URL, nil))
	if !strings.Contains(logs.String(), "too large") {
		t.Fatalf("log lacks the size refusal:\n%s", logs)
	}
}

func TestRefuseDowngrade(t *testing.T) {
	req := func(u string) *http.Request {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: parsed}
	}
	via := []*http.Request{req("https://idp.example.com/jwks")}
	tests := []struct {
		to   string
		via  []*http.Request
		want string // "" means followed
	}{
		{"https://cdn.example.com/jwks", via, ""},
		{"http://127.0.0.1:9000/jwks", via, ""},
		{"http://localhost/jwks", via, ""},
		{"http://cdn.example.com/jwks", via, "refusing a redirect to http://cdn.example.com/jwks"},
		{"https://cdn.example.com/jwks", []*http.Request{via[0], via[0], via[0], via[0], via[0]}, "stopped after 5 redirects"},
	}
	for _, tt := range tests {
		err := refuseDowngrade(req(tt.to), tt.via)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && !strings.Contains(got, tt.want)) {
			t.Errorf("%s: got %v, want %q", tt.to, err, tt.want)
		}
	}
}

func writeJWKS(t testing.TB, path string, set []jwk) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, jwksJSON(t, set), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as editors and deploy tools replace files
		t.Fatal(err)
	}
}

func fileOptions(path string, mod func(*Options)) Options {
	return jwtOptions("", func(o *Options) {
		o.JWT.JWKSURL = ""
		o.JWT.JWKSFile = path
		if mod != nil {
			mod(o)
		}
	})
}

// TestJWKSFile: keys from a file, with rotation on an unknown kid, and API keys beside them.
func TestJWKSFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, defaultJWKS())
	a, _ := newAuth(t, fileOptions(path, nil))
	if sub, err := a.Authenticate(request("", bearer(rs256(t, nil)))); err != nil || sub.Principal != "alice" || len(sub.Roles) != 2 {
		t.Fatalf("got %+v, %v", sub, err)
	}
	if sub, err := a.Authenticate(request("", bearer(aliceKey))); err != nil || sub.Attrs["region"] != "eu" {
		t.Fatalf("API key beside a JWKS file: %+v, %v", sub, err)
	}
	ed2 := newEdKey(t)
	writeJWKS(t, path, append(defaultJWKS(), jwk{kid: "ed-2", alg: jwkset.AlgEdDSA, key: ed2.Public()}))
	if _, err := a.Authenticate(request("", bearer(sign(t, jwt.SigningMethodEdDSA, ed2, "ed-2", claims(nil), nil)))); err != nil {
		t.Fatalf("rotated-in key refused: %v", err)
	}
	_, err := a.Authenticate(request("", bearer(sign(t, jwt.SigningMethodRS256, keys().rsa, "ghost", claims(nil), nil))))
	if f := failure(t, err); !strings.Contains(f.Reason, `"ghost"`) {
		t.Fatalf("unknown kid: reason %q", f.Reason)
	}
}

// TestJWKSFileRevocation: a key removed from the file stops verifying after the periodic re-read; a
// broken file keeps the last good keys.
func TestJWKSFileRevocation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, defaultJWKS())
	a, logs := newAuth(t, fileOptions(path, func(o *Options) { o.JWT.Refresh = 10 * time.Millisecond }))
	token := rs256(t, nil)

	if err := os.WriteFile(path, []byte(`{"keys": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a failed re-read", func() bool { return strings.Contains(logs.String(), "cannot re-read the JWT signing keys") })
	if _, err := a.Authenticate(request("", bearer(token))); err != nil {
		t.Fatalf("a broken file dropped the good keys: %v", err)
	}

	writeJWKS(t, path, defaultJWKS()[1:]) // rsa-1 revoked
	eventually(t, "the revoked key to be refused", func() bool {
		_, err := a.Authenticate(request("", bearer(token)))
		return err != nil
	})
}

func TestJWKSFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "cannot read it: no such file or directory"},
		{"a directory", dir, "is a directory"},
		{"not JSON", write("bad.json", "keys:\n- x\n"), `not a JWK Set (JSON with a "keys" list)`},
		{"no keys", write("empty.json", `{"keys": []}`), "it holds no usable key"},
		{"invalid key", write("invalid.json", `{"keys": [{"kty": "RSA", "kid": "k1", "n": "!!", "e": "AQAB"}]}`), `key 0 (kid "k1")`},
		{"too large", write("large.json", `{"keys": [], "pad": "`+strings.Repeat("x", maxJWKSBytes)+`"}`), "larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(context.Background(), fileOptions(tt.path, nil), nil)
			if err == nil {
				a.Close()
				t.Fatal("built")
			}
			if msg := err.Error(); !strings.Contains(msg, "auth.jwt.jwks_file "+tt.path) || !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q, want it to name the file and contain %q", msg, tt.want)
			}
		})
	}
}
