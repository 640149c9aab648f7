package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// toolgate in front of a published server it did not write:
// npm @modelcontextprotocol/server-everything over stdio. Text, images,
// resource links and structured content pass through; its schemas are
// enforced. Needs `npm install` in e2e/ts (see TestTypeScriptSDKClient).
func TestServerEverythingUpstream(t *testing.T) {
	bin, _ := filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("server-everything not installed: %v", err)
		}
		t.Skip("server-everything not installed: run npm install in e2e/ts")
	}
	cfg := writeConfig(t, fmt.Sprintf("  everything:\n    command: %q\n    args: [stdio]\n    init_timeout: 30s\n", bin))
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	if names := toolNames(t, c); !contains(names, "everything__echo") || !contains(names, "everything__get-structured-content") {
		t.Fatalf("tools: %v", names)
	}
	cases := []struct {
		tool, args, wantCode, wantData string
		wantBlock                      func(mcp.Content) bool
	}{
		{"everything__echo", `{"message":"héllo"}`, "", "Echo: héllo", nil},
		{"everything__get-sum", `{"a":2,"b":3}`, "", "5", nil},
		{"everything__get-sum", `{"a":"two","b":3}`, "invalid_arguments", "", nil},
		{"everything__get-structured-content", `{"location":"New York"}`, "", "temperature", nil},
		{"everything__get-tiny-image", `{}`, "", "", func(b mcp.Content) bool { _, ok := b.(mcp.ImageContent); return ok }},
		{"everything__get-resource-links", `{"count":2}`, "", "", func(b mcp.Content) bool { _, ok := b.(mcp.ResourceLink); return ok }},
	}
	for _, tc := range cases {
		t.Run(tc.tool+tc.wantCode, func(t *testing.T) {
			res, env := callE2E(t, c, tc.tool, tc.args)
			if code, _ := env["error_code"].(string); code != tc.wantCode {
				t.Fatalf("error_code %q, want %q: %v", code, tc.wantCode, env)
			}
			if !strings.Contains(fmt.Sprint(env["data"]), tc.wantData) {
				t.Errorf("data %v lacks %q", env["data"], tc.wantData)
			}
			if tc.wantBlock != nil {
				found := false
				for _, b := range res.Content {
					found = found || tc.wantBlock(b)
				}
				if !found {
					t.Errorf("content blocks %#v lack the expected kind", res.Content)
				}
			}
		})
	}
}
