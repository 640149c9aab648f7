package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/testupstream"
	"github.com/toolgate/toolgate/upstreams"
)

// Progress from upstreams configured as serve configures them (a stdio
// child, a Streamable HTTP server): 20 concurrent calls each see only their
// own notifications, and most of them (mcp-go trap 5).
func TestUpstreamProgressPerCallEndToEnd(t *testing.T) {
	httpURL, stop, err := testupstream.StartHTTP(testupstream.Options{Name: "ph"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	_, _, gw := httpGatewayFull(t, writeConfig(t, stdioUpstream(t, "ps", "")+fmt.Sprintf("  ph:\n    url: %q\n    egress: {allow: [loopback]}\n", httpURL)))
	for _, server := range []string{"ps", "ph"} {
		t.Run(server, func(t *testing.T) {
			const calls = 20
			var wg sync.WaitGroup
			var delivered, sent atomic.Int64
			for i := range calls {
				steps := 10 + i
				sent.Add(int64(steps))
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var returned atomic.Bool
					_, err := gw.Upstreams().CallToolProgress(ctx, server, "progress", json.RawMessage(fmt.Sprintf(`{"steps":%d,"ms":5}`, steps)),
						func(p upstreams.Progress) {
							if returned.Load() || p.Total == nil || *p.Total != float64(steps) {
								t.Errorf("call %d: foreign or late progress %+v", i, p)
							}
							delivered.Add(1)
						})
					returned.Store(true)
					if err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d of %d notifications delivered", server, delivered.Load(), sent.Load())
			if delivered.Load() < sent.Load()/2 {
				t.Errorf("only %d of %d notifications delivered", delivered.Load(), sent.Load())
			}
		})
	}
}

// hostileModeServers: "hostile" has short timeouts on the tools that never
// answer in time; "endless" has a small result cap.
func hostileModeServers(t *testing.T) string {
	return stdioUpstream(t, "hostile", "    tools:\n      wrong_id: {timeout: 300ms}\n      ignore_cancel: {timeout: 300ms}\n") +
		stdioUpstream(t, "endless", "    max_result_bytes: 65536\n")
}

// cancelledIDs asks the hostile upstream which request ids it got
// notifications/cancelled for, waiting for at least n.
func cancelledIDs(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	res, env := callE2E(t, c, "hostile__cancelled_requests", fmt.Sprintf(`{"wait_for":%d,"ms":20000}`, n))
	if env["ok"] != true {
		t.Fatalf("cancelled_requests: %v", env)
	}
	var got struct {
		Cancelled []string `json:"cancelled"`
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("cancelled_requests answer %q: %v", text, err)
	}
	return got.Cancelled
}

// Protocol abuse from a real upstream process, through the whole gateway.
func TestHostileUpstreamModesEndToEnd(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, hostileModeServers(t)))
	c := connectHTTP(t, url, aliceKey)

	if _, env := callE2E(t, c, "hostile__stdout_noise", `{}`); env["ok"] != true {
		t.Errorf("stdout_noise: %v", env)
	}
	if _, env := callE2E(t, c, "hostile__drip", `{"bytes":2000,"chunk":64,"ms_per_chunk":1}`); env["ok"] != true {
		t.Errorf("drip: %v", env)
	}
	if _, env := callE2E(t, c, "hostile__wrong_id", `{}`); env["error_code"] != "upstream_error" {
		t.Errorf("wrong_id: %v", env)
	}
	before := len(cancelledIDs(t, c, 1)) // wrong_id's garbage answer was announced too
	if _, env := callE2E(t, c, "hostile__ignore_cancel", `{"ms":800}`); env["error_code"] != "tool_timeout" {
		t.Errorf("ignore_cancel: %v", env)
	}
	if ids := cancelledIDs(t, c, before+1); len(ids) != before+1 {
		t.Errorf("after ignore_cancel's deadline the upstream got cancellations for %v", ids)
	}

	// The endless answer is cut by the cap, without the gateway holding it.
	var memBefore, memAfter runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&memBefore)
	if _, env := callE2E(t, c, "endless__endless", `{}`); env["error_code"] != "result_too_large" {
		t.Errorf("endless: %v", env)
	}
	runtime.ReadMemStats(&memAfter)
	if grew := memAfter.TotalAlloc - memBefore.TotalAlloc; grew > 16<<20 {
		t.Errorf("allocated %d bytes while an endless answer was cut", grew)
	}
	if _, env := callE2E(t, c, "hostile__echo", `{"still":1}`); env["ok"] != true {
		t.Errorf("hostile suffered from endless: %v", env)
	}
}

// A client that gives up (over Streamable HTTP it drops the request; over
// stdio it sends notifications/cancelled) gets the upstream call cancelled
// and notifications/cancelled sent upstream.
func TestClientCancelReachesUpstreamEndToEnd(t *testing.T) {
	cfg := writeConfig(t, hostileModeServers(t))
	url, _ := httpGateway(t, cfg)
	for _, tc := range []struct {
		name string
		c    *client.Client
	}{
		{"http", connectHTTP(t, url, aliceKey)},
		{"stdio", connectStdio(t, cfg)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(cancelledIDs(t, tc.c, 0))
			notes := notesOf(tc.c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The client gives up once the upstream is running the tool: its
			// first progress notification proves the call got there (a fixed
			// delay would race a slow machine).
			go func() {
				for notes.progress.Load() == 0 {
					select {
					case <-notes.changed:
					case <-ctx.Done():
						return
					}
				}
				cancel()
			}()
			req := mcp.CallToolRequest{}
			req.Params.Name = "hostile__progress"
			req.Params.Arguments = json.RawMessage(`{"steps":1000,"ms":50}`)
			req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
			// The client reports its own cancellation in more than one way
			// (mcp-go's HTTP transport sometimes says "unexpected nil
			// response"); what matters is that the call was abandoned.
			if _, err := tc.c.CallTool(ctx, req); err == nil {
				t.Fatal("the cancelled call answered")
			}
			if ids := cancelledIDs(t, tc.c, before+1); len(ids) != before+1 {
				t.Errorf("cancellations seen upstream: %v", ids)
			}
		})
	}
}
