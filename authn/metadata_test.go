package authn

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
)

// TestProtectedResourceMetadata checks the RFC 9728 document and how the handler answers each method.
func TestProtectedResourceMetadata(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	withJWT, _ := newAuth(t, jwtOptions(srv.URL, nil))
	keysOnly, _ := newAuth(t, Options{Resource: resource})
	tests := []struct {
		name string
		a    *Authenticator
		want map[string]any
	}{
		{"with JWT", withJWT, map[string]any{
			"resource":                 resource,
			"authorization_servers":    []any{issuer},
			"bearer_methods_supported": []any{"header"},
			"resource_name":            "toolgate",
		}},
		{"resource without JWT", keysOnly, map[string]any{
			"resource":                 resource,
			"bearer_methods_supported": []any{"header"},
			"resource_name":            "toolgate",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.a.ProtectedResourceMetadata()
			if h == nil {
				t.Fatal("no handler")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://gw.example.com/.well-known/oauth-protected-resource/mcp", nil))
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("got %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}

	methods := []struct {
		method string
		status int
		header string // a header that must be set
	}{
		{http.MethodHead, http.StatusOK, "Content-Type"},
		{http.MethodOptions, http.StatusNoContent, "Access-Control-Allow-Methods"},
		{http.MethodPost, http.StatusMethodNotAllowed, "Allow"},
	}
	for _, m := range methods {
		rec := httptest.NewRecorder()
		withJWT.ProtectedResourceMetadata().ServeHTTP(rec, httptest.NewRequest(m.method, "/.well-known/oauth-protected-resource", nil))
		if rec.Code != m.status || rec.Header().Get(m.header) == "" || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: got %d, headers %v", m.method, rec.Code, rec.Header())
		}
	}
}

// TestMetadataURL: RFC 9728 §3.1 inserts the well-known path between host and path.
func TestMetadataURL(t *testing.T) {
	tests := []struct {
		resource string
		url      string
		paths    []string
	}{
		{"https://gw.example.com/mcp", "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
			[]string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}},
		{"https://gw.example.com:8443/tenants/a/mcp", "https://gw.example.com:8443/.well-known/oauth-protected-resource/tenants/a/mcp",
			[]string{"/.well-known/oauth-protected-resource/tenants/a/mcp", "/.well-known/oauth-protected-resource"}},
		{"https://gw.example.com/", "https://gw.example.com/.well-known/oauth-protected-resource", []string{"/.well-known/oauth-protected-resource"}},
		{"https://gw.example.com", "https://gw.example.com/.well-known/oauth-protected-resource", []string{"/.well-known/oauth-protected-resource"}},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
			[]string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			a, _ := newAuth(t, Options{Resource: tt.resource})
			if a.MetadataURL() != tt.url || !slices.Equal(a.MetadataPaths(), tt.paths) {
				t.Fatalf("got %s %v, want %s %v", a.MetadataURL(), a.MetadataPaths(), tt.url, tt.paths)
			}
			_, err := a.Authenticate(request(""))
			if f := failure(t, err); f.Challenge != `Bearer realm="toolgate", resource_metadata="`+tt.url+`"` {
				t.Fatalf("challenge %s", f.Challenge)
			}
		})
	}
}
