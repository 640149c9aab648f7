package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/conformanceserver"
)

// modernNotes is a 2026-07-28 client (mcp-go's, over Streamable HTTP) that
// records the notifications it receives, in order, with the moment each
// call returned among them.
type modernNotes struct {
	*client.Client
	mu   sync.Mutex
	seen []string // "method params", and "returned <tool>" when a call returned
}

func modernNotesClient(t *testing.T, url string) *modernNotes {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	c := &modernNotes{Client: client.NewClient(tr, client.WithSamplingHandler(sampler{}))}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		params, _ := json.Marshal(n.Params)
		c.note(n.Method + " " + string(params))
	})
	initClientVersion(t, c.Client, mcp.ProtocolVersion20260728)
	return c
}

func (c *modernNotes) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, s)
}

// call calls tool and returns what the client received during the call
// (before it returned) and its result's text.
func (c *modernNotes) call(t *testing.T, tool string, meta *mcp.Meta) ([]string, string) {
	t.Helper()
	c.mu.Lock()
	start := len(c.seen)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = map[string]any{}
	req.Params.Meta = meta
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	c.mu.Lock()
	during := append([]string(nil), c.seen[start:]...)
	c.mu.Unlock()
	return during, fmt.Sprint(res.Content)
}

// countNotes counts the notifications of method whose params contain
// every one of parts.
func countNotes(notes []string, method string, parts ...string) int {
	n := 0
next:
	for _, s := range notes {
		if !strings.HasPrefix(s, method+" ") {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(s, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// A 2026-07-28 client asks for log messages per request (_meta
// io.modelcontextprotocol/logLevel; mcp-go's client sends the level
// SetLevel recorded), and gets the call's log messages on the call's own
// stream, before its result; a request that asks for none gets none. The
// upstream is the conformance upstream at 2026-07-28, which logs only when
// its request asks (as the spec requires of it), so the gateway must pass
// the caller's level on. Before, a 2026-07-28 call's log messages were
// dropped (parkedRelay.Log), and the upstream was never asked for any.
func TestModernLogMessagesTravelOnTheCallStream(t *testing.T) {
	handler := conformanceserver.NewHTTPHandler(conformanceserver.New())
	up := httptest.NewServer(handler)
	t.Cleanup(func() {
		_ = handler.Shutdown(context.Background())
		up.Close()
	})
	servers := fmt.Sprintf("  ch:\n    url: %q\n    egress: {allow: [loopback]}\n    protocol: %q\n", up.URL+"/mcp", mcp.ProtocolVersion20260728) +
		fmt.Sprintf("  cs:\n    command: %q\n    env: {%s: conformance, GORACE: \"atexit_sleep_ms=0\"}\n    protocol: %q\n", self(t), execRole, mcp.ProtocolVersion20260728)
	url, logs := httpGateway(t, writeConfig(t, servers))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	for _, server := range []string{"ch", "cs"} {
		t.Run(server, func(t *testing.T) {
			c := modernNotesClient(t, url)
			tool := server + "__test_tool_with_logging"
			if during, _ := c.call(t, tool, nil); countNotes(during, "notifications/message") != 0 {
				t.Errorf("without a log level the client got %v", during)
			}
			if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
				t.Fatal(err)
			}
			const calls = 20
			for i := range calls {
				during, text := c.call(t, tool, nil)
				if got := countNotes(during, "notifications/message"); got != 3 || !strings.Contains(text, "executed successfully") {
					t.Fatalf("call %d at level info: %d of 3 log messages before the result %q: %v", i, got, text, during)
				}
			}
			// warning filters out the upstream's info messages, whoever filters.
			if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
				t.Fatal(err)
			}
			if during, _ := c.call(t, tool, nil); countNotes(during, "notifications/message") != 0 {
				t.Errorf("at level warning the client got %v", during)
			}
		})
	}
}

// A 2026-07-28 call parked for the client's input (the upstream asked for
// sampling) that sends progress once it has the answer sends it on the
// stream of the request that resumed it, under that request's progress
// token, before the result. Before, it went to the first request's
// stream, closed since it answered input_required, and was lost.
func TestModernProgressAfterResumeReachesTheResumingRequest(t *testing.T) {
	up := httptest.NewServer(&orderedProgressServer{})
	t.Cleanup(up.Close)
	url, logs := httpGateway(t, writeConfig(t, fmt.Sprintf("  pa:\n    url: %q\n    egress: {allow: [loopback]}\n", up.URL+"/mcp")))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	c := modernNotesClient(t, url)
	for i := range 10 {
		token := fmt.Sprintf("ask-%d", i)
		during, text := c.call(t, "pa__ask", &mcp.Meta{ProgressToken: token})
		if !strings.Contains(text, "sampled") {
			t.Fatalf("call %d: %s", i, text)
		}
		if got := countNotes(during, "notifications/progress", `"progressToken":"`+token+`"`); got != 1 {
			t.Fatalf("call %d: %d progress notifications for %s before the result, want 1: %v", i, got, token, during)
		}
	}
}
