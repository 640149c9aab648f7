package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
			cfg, mint := jwtConfig(t, stdioUpstream(t, "hostile", ""), "s, hostile/echo, call, hostile:write\n", "")
			url, endpoint := fastPathGateway(t, cfg, fast)
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
			if taken := endpoint.FastCalls(); (taken == 1) != fast {
				t.Fatalf("the fast path answered %d calls, fast path on: %v", taken, fast)
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

// TestTypeScriptSDKStepUp: the official TypeScript SDK's client, given toolgate's 403, steps up on
// its own: it reads the insufficient_scope challenge, fetches the protected-resource metadata the
// challenge names, asks its authorization server for exactly the challenge's scopes (those the token
// had and the missing one) for this resource, and repeats the call with the new token, which runs.
// The authorization server is answered inside the script (e2e/ts/stepup.mjs); the tokens are real
// JWTs the gateway verifies. Needs node and `npm install` in e2e/ts, as TestTypeScriptSDKClient.
func TestTypeScriptSDKStepUp(t *testing.T) {
	script, _ := filepath.Abs("../../e2e/ts/stepup.mjs")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat("../../e2e/ts/node_modules/@modelcontextprotocol/sdk")
	if err != nil || modErr != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("node (%v) or the SDK in e2e/ts/node_modules (%v) missing", err, modErr)
		}
		t.Skip("node or e2e/ts/node_modules missing: run npm install in e2e/ts")
	}
	url, mint := jwtGatewayWith(t, "s, hostile/echo, call, hostile:write\n", "")
	lacking, granted := validClaims("alice"), validClaims("alice")
	lacking["scope"] = "openid"
	granted["scope"] = "hostile:write openid"
	out, err := exec.Command(node, script, strings.TrimSuffix(url, "/mcp"), mint(lacking), mint(granted), "hostile__echo", `{"said":"hi"}`).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the TypeScript client failed: %v\n%s", err, stderr)
	}
	var got struct {
		AuthorizeScope    string            `json:"authorizeScope"`
		AuthorizeResource string            `json:"authorizeResource"`
		TokenRequest      map[string]string `json:"tokenRequest"`
		FirstError        string            `json:"firstError"`
		Retried           *struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"retried"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if got.FirstError != "UnauthorizedError" || got.AuthorizeScope != "hostile:write openid" || got.AuthorizeResource != testResource {
		t.Fatalf("the SDK did not step up as the challenge says: %s", out)
	}
	if got.TokenRequest["grant_type"] != "authorization_code" || got.TokenRequest["code_verifier"] == "" || got.TokenRequest["resource"] != testResource {
		t.Fatalf("token request %v", got.TokenRequest)
	}
	if got.Retried == nil || got.Retried.IsError || got.Retried.StructuredContent["ok"] != true {
		t.Fatalf("the repeated call with the new token: %s", out)
	}
}

// TestScopeChallengeOnResourcesAndPrompts: s lines with the read and get actions stop a
// resources/read and a prompts/get (relayed through mcp-go's handler) with the same 403 challenge;
// with the scopes, both are answered.
func TestScopeChallengeOnResourcesAndPrompts(t *testing.T) {
	url, mint := jwtGatewayFor(t, everythingServer(t),
		"s, everything/demo://resource/dynamic/text/*, read, docs:read\ns, everything/args-prompt, get, prompts:get\n", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "demo://resource/dynamic/text/7"
	get := mcp.GetPromptRequest{}
	get.Params.Name = "everything__args-prompt"
	get.Params.Arguments = map[string]string{"city": "Lyon"}

	lacking := validClaims("alice")
	lacking["scope"] = "openid"
	rec := &challenges{}
	c := connectHTTP(t, url, mint(lacking), transport.WithHTTPBasicClient(&http.Client{Transport: rec}))
	defer c.Close()
	if _, err := c.ReadResource(ctx, read); err == nil || !strings.HasPrefix(rec.last(), `403 Bearer realm="toolgate", error="insufficient_scope", scope="docs:read openid", `) {
		t.Fatalf("resources/read without docs:read: %v, %q", err, rec.last())
	}
	if _, err := c.GetPrompt(ctx, get); err == nil || !strings.HasPrefix(rec.last(), `403 Bearer realm="toolgate", error="insufficient_scope", scope="openid prompts:get", `) {
		t.Fatalf("prompts/get without prompts:get: %v, %q", err, rec.last())
	}

	granted := validClaims("alice")
	granted["scope"] = "docs:read prompts:get"
	ok := connectHTTP(t, url, mint(granted))
	defer ok.Close()
	if got, err := ok.ReadResource(ctx, read); err != nil || len(got.Contents) == 0 {
		t.Fatalf("resources/read with docs:read: %v", err)
	}
	if got, err := ok.GetPrompt(ctx, get); err != nil || len(got.Messages) == 0 {
		t.Fatalf("prompts/get with prompts:get: %v", err)
	}
}
