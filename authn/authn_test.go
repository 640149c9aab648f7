package authn

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/authz"
)

const (
	challengeMissing = `Bearer realm="toolgate", resource_metadata="` + metaURL + `"`
	challengeInvalid = `Bearer realm="toolgate", error="invalid_token", error_description="the credential is not valid here", resource_metadata="` + metaURL + `"`
	challengeRequest = `Bearer realm="toolgate", error="invalid_request", error_description="send the credential in one Authorization header", resource_metadata="` + metaURL + `"`
)

// TestCredentials covers how a request's credential is found and routed, with JWT and API keys both
// configured: the status and the exact WWW-Authenticate value of every refusal.
func TestCredentials(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	alice := authz.Subject{Principal: "alice", Roles: []string{"support_agent", "viewer"}, Attrs: map[string]string{"region": "eu"}, Scoped: true}
	keyAlice := authz.Subject{Principal: "alice", Attrs: map[string]string{"region": "eu"}}
	tests := []struct {
		name      string
		req       *http.Request
		want      *authz.Subject
		status    int
		challenge string
		reason    string
	}{
		{"API key beside JWT, with its attributes", request("", bearer(aliceKey)), &keyAlice, 0, "", ""},
		{"scheme is case-insensitive", request("", "bearer "+aliceKey), &keyAlice, 0, "", ""},
		{"JWT", request("", bearer(rs256(t, nil))), &alice, 0, "", ""},
		{"missing credential", request(""), nil, 401, challengeMissing, "no credential"},
		{"unknown API key", request("", bearer("tg_not_a_key")), nil, 401, challengeInvalid, "unknown API key"},
		{"another scheme", request("", "Basic YWxpY2U6cHc="), nil, 401, challengeMissing, "does not use the Bearer scheme"},
		{"a bare key without scheme", request("", aliceKey), nil, 401, challengeMissing, "does not use the Bearer scheme"},
		{"empty bearer", request("", "Bearer "), nil, 401, challengeInvalid, "empty or not RFC 6750 token characters"},
		{"bearer with a space inside", request("", "Bearer a b"), nil, 401, challengeInvalid, "not RFC 6750 token characters"},
		{"two Authorization headers", request("", bearer(aliceKey), bearer(aliceKey)), nil, 400, challengeRequest, "more than one Authorization header"},
		{"token in the query string", request("?access_token=" + aliceKey), nil, 400, challengeRequest, "access_token in the query string"},
		{"token in the query string beside a valid header", request("?access_token=x", bearer(aliceKey)), nil, 400, challengeRequest, "query string"},
		{"empty access_token parameter", request("?access_token=", bearer(aliceKey)), nil, 400, challengeRequest, "query string"},
		{"other query parameters are fine", request("?session=1", bearer(aliceKey)), &keyAlice, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := a.Authenticate(tt.req)
			sub.Bearer = "" // kept for JWTs only: TestBearerKeptRedacted
			if tt.want != nil {
				if err != nil || !reflect.DeepEqual(sub, *tt.want) {
					t.Fatalf("got %+v, %v; want %+v", sub, err, *tt.want)
				}
				return
			}
			f := failure(t, err)
			if f.Status != tt.status || f.Challenge != tt.challenge {
				t.Errorf("got %d %s\nwant %d %s", f.Status, f.Challenge, tt.status, tt.challenge)
			}
			if !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", f.Reason, tt.reason)
			}
			if strings.Contains(f.Reason, aliceKey) || strings.Contains(f.Challenge, aliceKey) {
				t.Errorf("the credential leaked into the failure: %+v", f)
			}
		})
	}
}

// TestAPIKeysOnly: without JWT and without resource, keys work, a JWT-shaped token is an unknown key, and
// challenges carry no resource_metadata.
func TestAPIKeysOnly(t *testing.T) {
	a, _ := newAuth(t, Options{APIKeys: []APIKey{
		{Principal: "alice", SHA256: strings.ToUpper(HashKey(aliceKey))},
	}})
	sub, err := a.Authenticate(request("", bearer(aliceKey)))
	if err != nil || !reflect.DeepEqual(sub, authz.Subject{Principal: "alice"}) {
		t.Fatalf("got %+v, %v", sub, err)
	}
	_, err = a.Authenticate(request(""))
	if f := failure(t, err); f.Challenge != `Bearer realm="toolgate"` {
		t.Errorf("missing: challenge %s", f.Challenge)
	}
	_, err = a.Authenticate(request("", bearer("aaa.bbb.ccc")))
	f := failure(t, err)
	if f.Challenge != `Bearer realm="toolgate", error="invalid_token", error_description="the credential is not valid here"` {
		t.Errorf("invalid: challenge %s", f.Challenge)
	}
	if !strings.Contains(f.Reason, "looks like a JWT, but auth.jwt is not configured") {
		t.Errorf("reason %q", f.Reason)
	}
	if a.ProtectedResourceMetadata() != nil || a.MetadataURL() != "" || a.MetadataPaths() != nil {
		t.Error("metadata served without auth.resource")
	}
}

// TestAnonymous: allow_anonymous covers requests without any Authorization header, and nothing else: a
// failed credential is not downgraded, and a token in the URL is still refused.
func TestAnonymous(t *testing.T) {
	a, _ := newAuth(t, Options{
		AllowAnonymous: "guest",
		APIKeys:        []APIKey{{Principal: "alice", SHA256: HashKey(aliceKey)}},
	})
	tests := []struct {
		name   string
		req    *http.Request
		want   string // principal; "" means refused with status
		status int
	}{
		{"no credential", request(""), "guest", 0},
		{"API key", request("", bearer(aliceKey)), "alice", 0},
		{"wrong key is not downgraded", request("", bearer("tg_wrong")), "", 401},
		{"other scheme is not downgraded", request("", "Basic YWxpY2U6cHc="), "", 401},
		{"token in the query string", request("?access_token=x"), "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := a.Authenticate(tt.req)
			if tt.want != "" {
				if err != nil || sub.Principal != tt.want || sub.Roles != nil || sub.Attrs != nil {
					t.Fatalf("got %+v, %v; want principal %s", sub, err, tt.want)
				}
				return
			}
			if f := failure(t, err); f.Status != tt.status {
				t.Fatalf("status %d, want %d", f.Status, tt.status)
			}
		})
	}
}

// TestRespond: the response carries the challenge and a generic body, never the reason.
func TestRespond(t *testing.T) {
	tests := []struct {
		f    Failure
		body string
	}{
		{Failure{Status: 401, Challenge: challengeInvalid, Reason: "jwt: token has invalid claims: token is expired"}, "unauthorized: send Authorization: Bearer <API key or access token>\n"},
		{Failure{Status: 400, Challenge: challengeRequest, Reason: "access_token in the query string"}, "bad request: send the credential in one Authorization header, never in the URL\n"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		tt.f.Respond(rec)
		if rec.Code != tt.f.Status || rec.Header().Get("WWW-Authenticate") != tt.f.Challenge || rec.Body.String() != tt.body {
			t.Errorf("got %d %q %q", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body.String())
		}
		if tt.f.Error() != "not authenticated: "+tt.f.Reason {
			t.Errorf("Error() = %q", tt.f.Error())
		}
	}
}

// TestAttributesAreCopies: a caller changing a subject's attributes does not change the next request's.
func TestAttributesAreCopies(t *testing.T) {
	a, _ := newAuth(t, jwtOptions("", func(o *Options) { o.JWT = nil }))
	sub, _ := a.Authenticate(request("", bearer(aliceKey)))
	sub.Attrs["region"] = "us"
	if again, _ := a.Authenticate(request("", bearer(aliceKey))); again.Attrs["region"] != "eu" {
		t.Fatalf("attributes shared between requests: %v", again.Attrs)
	}
}

// TestConcurrentAuthenticate runs every kind of request at once, for the race detector.
func TestConcurrentAuthenticate(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	good := rs256(t, nil)
	reqs := []struct {
		auth string
		ok   bool
	}{{bearer(good), true}, {bearer(aliceKey), true}, {bearer("tg_wrong"), false}, {"", false}, {bearer(sign(t, jwt.SigningMethodEdDSA, keys().ed, "ed-1", claims(nil), nil)), true}}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				r := reqs[(g+i)%len(reqs)]
				req := request("")
				if r.auth != "" {
					req = request("", r.auth)
				}
				if _, err := a.Authenticate(req); (err == nil) != r.ok {
					errs <- fmt.Errorf("%q: err %v", r.auth, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestNewRefusesIncompleteJWT: Options built in code, without config's load checks, still cannot produce
// a verifier that accepts more than it should.
func TestNewRefusesIncompleteJWT(t *testing.T) {
	tests := []struct {
		name string
		mod  func(o *Options)
		want string
	}{
		{"no resource", func(o *Options) { o.Resource = "" }, "auth.jwt needs auth.resource"},
		{"no issuer", func(o *Options) { o.JWT.Issuer = "" }, "auth.jwt.issuer is required"},
		{"no key set", func(o *Options) { o.JWT.JWKSURL = "" }, "auth.jwt needs jwks_url or jwks_file"},
		{"both key sets", func(o *Options) { o.JWT.JWKSFile = "/x" }, "either auth.jwt.jwks_url or auth.jwt.jwks_file"},
		{"only shared-secret algorithms", func(o *Options) { o.JWT.Algorithms = []string{"HS256", "none"} }, "lists no accepted algorithm"},
		{"resource not absolute", func(o *Options) { o.Resource = "/mcp" }, "is not an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A closed loopback port: the verifier fails before or without reaching it.
			o := jwtOptions("http://127.0.0.1:1/jwks", tt.mod)
			a, err := New(context.Background(), o, nil)
			if err == nil {
				a.Close()
				t.Fatal("built")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// b64token accepts exactly what RFC 6750's b64token rule (the regular
// expression it replaced) accepts.
func TestB64Token(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)
	for _, s := range []string{"", "abc", "AZaz09-._~+/", "abc==", "abc=d", "=", "==abc", "a b", "a\tb", "ключ", "a,b",
		"tg_live_1234", "a=b=", "x=", "\x00", "abc\n", "é", "a\"b"} {
		if got, want := b64token(s), rule.MatchString(s); got != want {
			t.Errorf("b64token(%q) = %v, the rule says %v", s, got, want)
		}
	}
}
