package upstreams

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// fakeCreds authorizes every request with value, or refuses with err; it records what was rejected.
type fakeCreds struct {
	mu       sync.Mutex
	value    string
	err      error
	rejected []string
}

func (f *fakeCreds) Authorization(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.value, f.err
}

func (f *fakeCreds) Rejected(_ context.Context, v string) {
	f.mu.Lock()
	f.rejected = append(f.rejected, v)
	f.mu.Unlock()
}

func (f *fakeCreds) set(value string, err error) {
	f.mu.Lock()
	f.value, f.err = value, err
	f.mu.Unlock()
}

type refusal struct{}

func (refusal) Error() string       { return "the caller has no JWT" }
func (refusal) CallerRefused() bool { return true }

// TestCredentialsHook: with Credentials, the capped transport sets every request's Authorization,
// sends nothing when no credential can be had (a NotSent CallError carrying a CredentialError that
// says whether the caller was refused outright), and reports a 401 so the token is dropped.
func TestCredentialsHook(t *testing.T) {
	mcpSrv := server.NewMCPServer("protected", "1.0.0")
	mcpSrv.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := server.NewStreamableHTTPServer(mcpSrv)
	var mu sync.Mutex
	var seen []string
	unauthorized := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		deny := unauthorized
		mu.Unlock()
		if deny {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer func() { _ = h.Shutdown(context.Background()) }()

	creds := &fakeCreds{value: "Bearer upstream-token"}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: &cappedTransport{base: base, max: 1 << 20, onOversize: func([]byte) {}, creds: creds}}
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	ping := mcp.CallToolRequest{}
	ping.Params.Name = "ping"
	if _, err := c.CallTool(ctx, ping); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, a := range seen {
		if a != "Bearer upstream-token" {
			t.Errorf("the upstream saw Authorization %q", a)
		}
	}
	sent := len(seen)
	mu.Unlock()

	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"authorization server down", errors.New("token endpoint at idp: answered HTTP 503"), false},
		{"caller refused", refusal{}, true},
	} {
		creds.set("", tc.err)
		_, err := c.CallTool(ctx, ping)
		var ce *CallError
		if !errors.As(err, &ce) || ce.Where != NotSent {
			t.Fatalf("%s: got %v, want a NotSent CallError", tc.name, err)
		}
		if is, refused := IsCredentialError(err); !is || refused != tc.refused {
			t.Errorf("%s: IsCredentialError = %v, %v; want true, %v", tc.name, is, refused, tc.refused)
		}
	}
	mu.Lock()
	if len(seen) != sent {
		t.Error("a request without a credential reached the upstream")
	}
	unauthorized = true
	mu.Unlock()
	creds.set("Bearer revoked", nil)
	if _, err := c.CallTool(ctx, ping); err == nil {
		t.Fatal("a 401 was taken for an answer")
	}
	creds.mu.Lock()
	defer creds.mu.Unlock()
	if len(creds.rejected) != 1 || creds.rejected[0] != "Bearer revoked" {
		t.Errorf("rejected %q, want the revoked token once", creds.rejected)
	}
}

// perCallerCreds is a per_user-like source: its value goes in X-Api-Key, a missing credential is
// authorization required, and a 401 asks the caller for a new one.
type perCallerCreds struct{ fakeCreds }

func (*perCallerCreds) HeaderName() string { return "X-Api-Key" }

func (*perCallerCreds) RejectedError(context.Context) error { return needAuth{rejected: true} }

type needAuth struct{ rejected bool }

func (needAuth) Error() string { return "no credential of the caller's" }
func (n needAuth) AuthorizationRequired() string {
	if n.rejected {
		return "connect again"
	}
	return "connect first"
}

// TestPerCallerCredentialsHook: a source's header name is used; an empty value sends the request
// without one; a missing caller credential surfaces as AuthorizationRequired before anything is sent;
// and the upstream's 401 to a caller's credential becomes a NotSent AuthorizationRequired error
// rather than a response.
func TestPerCallerCredentialsHook(t *testing.T) {
	mcpSrv := server.NewMCPServer("protected", "1.0.0")
	mcpSrv.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := server.NewStreamableHTTPServer(mcpSrv)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		if k := r.Header.Get("X-Api-Key"); k != "" && k != "good" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer func() { _ = h.Shutdown(context.Background()) }()

	creds := &perCallerCreds{}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: &cappedTransport{base: base, max: 1 << 20, onOversize: func([]byte) {}, creds: creds}}
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil { // value "": no header at all
		t.Fatal(err)
	}
	ping := mcp.CallToolRequest{}
	ping.Params.Name = "ping"
	creds.set("good", nil)
	if _, err := c.CallTool(ctx, ping); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if seen[0] != "|" || seen[len(seen)-1] != "good|" {
		t.Errorf("the upstream saw %q; want no credential on initialize, then X-Api-Key: good and no Authorization", seen)
	}
	sent := len(seen)
	mu.Unlock()

	creds.set("", needAuth{})
	_, err = c.CallTool(ctx, ping)
	if msg, ok := AuthorizationRequired(err); !ok || msg != "connect first" {
		t.Errorf("a caller without a credential: %v (AuthorizationRequired %q, %v)", err, msg, ok)
	}
	mu.Lock()
	if len(seen) != sent {
		t.Error("a request without a credential reached the upstream")
	}
	mu.Unlock()

	creds.set("stale", nil)
	_, err = c.CallTool(ctx, ping)
	var ce *CallError
	if msg, ok := AuthorizationRequired(err); !ok || msg != "connect again" || !errors.As(err, &ce) || ce.Where != NotSent {
		t.Errorf("a refused caller credential: %v (AuthorizationRequired %q, %v); want a NotSent CallError", err, msg, ok)
	}
	if _, ok := AuthorizationRequired(errors.New("other")); ok {
		t.Error("AuthorizationRequired found in an unrelated error")
	}
}
