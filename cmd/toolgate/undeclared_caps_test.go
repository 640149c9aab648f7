package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// noRootsClient answers sampling and elicitation, and so declares only
// those: mcp-go's client declares a capability for each handler it has.
type noRootsClient struct{ *clientAnswers }

// An upstream's roots/list during the call of a client that never
// declared roots is answered by the gateway (-32601) and never reaches
// the client: a 2026-07-28 client used to get an input_required for it
// and fail the call with "no roots handler configured".
func TestRootsNeverAskedOfClientWithoutRoots(t *testing.T) {
	bin := everythingServer(t)
	for _, version := range []string{"2025-11-25", mcp.LATEST_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			// A gateway of its own: server-everything asks for roots once per
			// connection, so the first caller is the one asked.
			url, logs := httpGateway(t, writeConfig(t, bin))
			defer func() {
				if t.Failed() {
					t.Log(logs)
				}
			}()
			answers := &clientAnswers{asked: make(chan string, 8)}
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}))
			if err != nil {
				t.Fatal(err)
			}
			h := noRootsClient{answers}
			c := initClientVersion(t, client.NewClient(tr, client.WithSamplingHandler(h), client.WithElicitationHandler(h),
				client.WithProtocolVersion(version)), version)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "everything__get-roots-list"
			req.Params.Arguments = map[string]any{}
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("get-roots-list: %v", err)
			}
			env, _ := res.StructuredContent.(map[string]any)
			if env["ok"] != true {
				t.Fatalf("get-roots-list: %v", env)
			}
			select {
			case got := <-answers.asked:
				t.Fatalf("the client was asked for %s", got)
			default:
			}
			if text := strings.ToLower(fmt.Sprint(env["data"], res.Content)); strings.Contains(text, "the-test-root") {
				t.Errorf("roots reached the upstream from a client without roots: %s", text)
			}
		})
	}
}
