package authn

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestTokenScopes is the decision table for a token's scope claims: scope (a string), scp (a string
// or a list), which wins, and every malformed or hostile shape, each refused with a precise reason.
func TestTokenScopes(t *testing.T) {
	many := make([]any, 257)
	for i := range many {
		many[i] = "s"
	}
	tests := []struct {
		name   string
		claims map[string]any
		want   []string
		err    string
	}{
		{"no claim: no scopes", map[string]any{}, nil, ""},
		{"scope string", map[string]any{"scope": "orders:write orders:read"}, []string{"orders:read", "orders:write"}, ""},
		{"scope with runs of spaces", map[string]any{"scope": "  b   a "}, []string{"a", "b"}, ""},
		{"empty scope string", map[string]any{"scope": ""}, nil, ""},
		{"scp string (Entra ID)", map[string]any{"scp": "User.Read Mail.Read"}, []string{"Mail.Read", "User.Read"}, ""},
		{"scp list (Okta)", map[string]any{"scp": []any{"orders:write", "openid"}}, []string{"openid", "orders:write"}, ""},
		{"scope wins over scp", map[string]any{"scope": "a", "scp": []any{"b"}}, []string{"a"}, ""},
		{"duplicates collapse", map[string]any{"scp": []any{"a", "b", "a", "a"}}, []string{"a", "b"}, ""},
		{"scope as a list", map[string]any{"scope": []any{"a"}}, nil, "the scope claim is a list"},
		{"scope as a number", map[string]any{"scope": 7.0}, nil, "the scope claim is neither a string nor a list of strings"},
		{"scp as an object", map[string]any{"scp": map[string]any{"a": true}}, nil, "the scp claim is neither a string nor a list of strings"},
		{"scp null", map[string]any{"scp": nil}, nil, "the scp claim is neither a string nor a list of strings"},
		{"a number in scp", map[string]any{"scp": []any{"a", 1.0}}, nil, "the scp claim holds a value that is not a string"},
		{"a list in scp", map[string]any{"scp": []any{[]any{"a"}}}, nil, "the scp claim holds a value that is not a string"},
		{"a space inside a list item", map[string]any{"scp": []any{"a b"}}, nil, "a scope in claim scp holds a character a scope cannot"},
		{"a quote in a scope", map[string]any{"scope": `a"b`}, nil, "a scope in claim scope holds a character"},
		{"a backslash in a scope", map[string]any{"scope": `a\b`}, nil, "holds a character"},
		{"a control character", map[string]any{"scope": "a\nb"}, nil, "holds a character"},
		{"an empty list item", map[string]any{"scp": []any{""}}, nil, "a scope in claim scp is empty"},
		{"a scope over 256 bytes", map[string]any{"scope": strings.Repeat("x", 257)}, nil, "is longer than 256 bytes"},
		{"257 scopes in a list", map[string]any{"scp": many}, nil, "the scp claim holds 257 scopes, over the limit of 256"},
		{"257 scopes in a string, duplicates counted", map[string]any{"scope": strings.TrimSpace(strings.Repeat("s ", 257))}, nil, "the scope claim holds 257 scopes"},
		{"a huge scope string", map[string]any{"scope": strings.Repeat("x", 1<<20)}, nil, "bytes long, over the limit of 256 scopes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TokenScopes(tt.claims)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, %v; want the error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestJWTScopes: a JWT caller is Scoped, with its token's scopes; a malformed scope claim refuses
// the token (401 invalid_token), with the reason in the log only.
func TestJWTScopes(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	sub, err := a.Authenticate(request("", bearer(rs256(t, func(c jwt.MapClaims) { c["scope"] = "orders:write orders:read orders:write" }))))
	if err != nil || !sub.Scoped || !slices.Equal(sub.Scopes, []string{"orders:read", "orders:write"}) {
		t.Fatalf("got %+v, %v", sub, err)
	}
	sub, err = a.Authenticate(request("", bearer(rs256(t, nil))))
	if err != nil || !sub.Scoped || sub.Scopes != nil {
		t.Fatalf("a token without scopes: got %+v, %v", sub, err)
	}
	_, err = a.Authenticate(request("", bearer(rs256(t, func(c jwt.MapClaims) { c["scp"] = []any{"a", 3} }))))
	f := failure(t, err)
	if f.Status != http.StatusUnauthorized || f.Challenge != challengeInvalid || !strings.Contains(f.Reason, "jwt: the scp claim holds a value that is not a string") {
		t.Fatalf("got %+v", f)
	}
	key, err := a.Authenticate(request("", bearer(aliceKey)))
	if err != nil || key.Scoped || key.Scopes != nil {
		t.Fatalf("an API key carries no scopes: got %+v, %v", key, err)
	}
}

// TestInsufficientScope: the 403 answer carries exactly the challenge the MCP authorization
// specification describes, and a body that says what to do without any detail.
func TestInsufficientScope(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	rec := httptest.NewRecorder()
	a.InsufficientScope([]string{"orders:read", "orders:write"}).Respond(rec)
	want := `Bearer realm="toolgate", error="insufficient_scope", scope="orders:read orders:write", ` +
		`error_description="the access token lacks a scope this request needs", ` +
		`resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"`
	if rec.Code != http.StatusForbidden || rec.Header().Get("WWW-Authenticate") != want {
		t.Fatalf("got %d %q\nwant 403 %q", rec.Code, rec.Header().Get("WWW-Authenticate"), want)
	}
	if !strings.Contains(rec.Body.String(), "lacks a scope") {
		t.Fatalf("body %q", rec.Body.String())
	}
}

// TestScopesSupported: the metadata lists scopes_supported once set, follows each change, and
// leaves the field out when there are none.
func TestScopesSupported(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	get := func() map[string]any {
		rec := httptest.NewRecorder()
		a.ProtectedResourceMetadata().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil))
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	if _, ok := get()["scopes_supported"]; ok {
		t.Fatal("scopes_supported listed before any scope is known")
	}
	a.SetScopesSupported([]string{"orders:read", "orders:write"})
	if got, _ := json.Marshal(get()["scopes_supported"]); string(got) != `["orders:read","orders:write"]` {
		t.Fatalf("scopes_supported = %s", got)
	}
	a.SetScopesSupported(nil)
	if _, ok := get()["scopes_supported"]; ok {
		t.Fatal("scopes_supported still listed after the scopes went")
	}
	keysOnly, _ := newAuth(t, Options{})
	keysOnly.SetScopesSupported([]string{"a"}) // no metadata: nothing to do
}
