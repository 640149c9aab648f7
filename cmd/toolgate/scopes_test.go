package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// challenges records the status and WWW-Authenticate of every response an MCP client gets.
type challenges struct {
	mu   sync.Mutex
	seen []string // "<status> <WWW-Authenticate>"
}

func (c *challenges) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.StatusCode >= 400 {
		c.mu.Lock()
		c.seen = append(c.seen, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate")))
		c.mu.Unlock()
	}
	return resp, err
}

func (c *challenges) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return ""
	}
	return c.seen[len(c.seen)-1]
}

// TestScopeStepUpThroughGateway: with a scope line for hostile/echo, through a real MCP client over
// Streamable HTTP with JWTs, on the fast path and through mcp-go's handler alike: a token without
// hostile:write is answered HTTP 403 with exactly the insufficient_scope challenge (naming the
// scopes the token has with the one it lacks) and the call does not run; the tool stays listed for
// it; the same client with a token that has the scope runs the call; an API-key caller, which
// carries no scopes, is not limited; the protected-resource metadata lists scopes_supported.
func TestScopeStepUpThroughGateway(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast path %v", fast), func(t *testing.T) {
			url, mint := jwtGatewayWith(t, "s, hostile/echo, call, hostile:write\n",
				fmt.Sprintf("listen: {fast_path: %v}\n", fast))
			lacking := validClaims("alice")
			lacking["scope"] = "openid hostile:read"
			rec := &challenges{}
			c := connectHTTP(t, url, mint(lacking), transport.WithHTTPBasicClient(&http.Client{Transport: rec}))
			defer c.Close()
			if names := toolNames(t, c); !slices.Contains(names, "hostile__echo") {
				t.Fatalf("hostile__echo is not listed for a token lacking its scope: %v", names)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "hostile__echo", Arguments: map[string]any{"said": "hi"}}})
			want := `403 Bearer realm="toolgate", error="insufficient_scope", scope="hostile:read hostile:write openid", ` +
				`error_description="the access token lacks a scope this request needs", ` +
				`resource_metadata="https://gw.test/.well-known/oauth-protected-resource/mcp"`
			if err == nil || rec.last() != want {
				t.Fatalf("a token lacking hostile:write: err %v, response %q\nwant %q", err, rec.last(), want)
			}

			granted := validClaims("alice")
			granted["scp"] = []string{"hostile:write", "openid"}
			ok := connectHTTP(t, url, mint(granted))
			defer ok.Close()
			if _, env := callE2E(t, ok, "hostile__echo", `{"said":"hi"}`); env["ok"] != true {
				t.Fatalf("a token with hostile:write: %v", env)
			}
			key := connectHTTP(t, url, aliceKey)
			defer key.Close()
			if _, env := callE2E(t, key, "hostile__echo", `{"said":"hi"}`); env["ok"] != true {
				t.Fatalf("an API key (no scopes): %v", env)
			}

			resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var doc struct {
				ScopesSupported []string `json:"scopes_supported"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || !slices.Equal(doc.ScopesSupported, []string{"hostile:write"}) {
				t.Fatalf("scopes_supported %v (%v)", doc.ScopesSupported, err)
			}
		})
	}
}

// TestScopeRefusedToken: a token whose scope claim is malformed is not a caller at all (401
// invalid_token), however the rest of it looks.
func TestScopeRefusedToken(t *testing.T) {
	url, mint := jwtGatewayWith(t, "s, hostile/echo, call, hostile:write\n", "")
	bad := validClaims("alice")
	bad["scp"] = []any{"hostile:write", 7}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+mint(bad))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("status %d, challenge %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
