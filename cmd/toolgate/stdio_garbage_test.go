package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// A stdio upstream that answers garbage (an answer under a wrong id, or
// one split by a raw newline) gets the caller upstream_error at once, as
// over HTTP, not tool_timeout at the tool's deadline (issue 16, item 2);
// the upstream keeps serving afterwards.
func TestStdioGarbageAnswerFailsAtOnce(t *testing.T) {
	const toolTimeout = 5 * time.Second // what the old transport made the caller wait
	const atOnce = 2 * time.Second      // well before it
	servers := stdioUpstream(t, "garbled", "    tools:\n      wrong_id: {timeout: 5s}\n      split_line: {timeout: 5s}\n")
	url, logs := httpGateway(t, writeConfig(t, servers))
	c := connectHTTP(t, url, aliceKey)
	if toolTimeout <= atOnce {
		t.Fatal("the test's own bound must be shorter than the tool's timeout")
	}

	for _, tool := range []string{"garbled__wrong_id", "garbled__split_line"} {
		t.Run(tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), atOnce)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = tool
			req.Params.Arguments = map[string]any{}
			res, err := c.CallTool(ctx, req)
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("no answer within %v (the tool's timeout is %v): %v\n%s", atOnce, toolTimeout, err, logs)
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			env, _ := res.StructuredContent.(map[string]any)
			if env["error_code"] != "upstream_error" {
				t.Fatalf("got %v, want upstream_error\n%s", env, logs)
			}
			// The connection survives the garbage.
			if _, env := callE2E(t, c, "garbled__echo", `{"after":"garbage"}`); env["ok"] != true {
				t.Fatalf("echo after %s: %v", tool, env)
			}
		})
	}
}
