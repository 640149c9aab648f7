package testupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// CounterTool is the one tool of a Counter upstream.
const CounterTool = "count"

// Counter is an upstream served in-process over Streamable HTTP whose one tool, count {label, hold?},
// counts its executions per label: several gateways pointed at it share one count, so a test can prove
// that a side effect ran once across replicas (each replica would otherwise start an upstream process of
// its own). The tool is annotated as neither read-only nor idempotent.
//
// A call with hold: true reports its label on Started, then waits until Release(label) (or until its
// context ends, answering a JSON-RPC error), so a test can keep it in flight while it sends duplicates.
type Counter struct {
	URL     string
	started chan string

	mu     sync.Mutex
	counts map[string]int
	gates  map[string]chan struct{}
}

// StartCounter serves a Counter until the test ends.
func StartCounter(t testing.TB) *Counter {
	t.Helper()
	c := &Counter{started: make(chan string, 64), counts: map[string]int{}, gates: map[string]chan struct{}{}}
	srv := server.NewMCPServer("counter", ServerVersion, server.WithToolCapabilities(true))
	srv.AddTool(mcp.Tool{
		Name:        CounterTool,
		Description: "Counts its executions per label (a side effect that must not run twice); hold waits for the test.",
		RawInputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"hold":{"type":"boolean"}},` +
			`"required":["label"],"additionalProperties":false}`),
		Annotations: hints(false, false, false, false),
	}, c.count)
	h := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		c.mu.Lock()
		for _, g := range c.gates {
			select {
			case <-g:
			default:
				close(g) // held calls still waiting end now
			}
		}
		c.mu.Unlock()
		_ = h.Shutdown(context.Background())
		ts.Close()
	})
	c.URL = ts.URL + "/mcp"
	return c
}

func (c *Counter) count(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Label string `json:"label"`
		Hold  bool   `json:"hold"`
	}
	if err := json.Unmarshal(rawArgs(req), &args); err != nil {
		return nil, err
	}
	if args.Hold {
		gate := c.gate(args.Label)
		c.started <- args.Label
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mu.Lock()
	c.counts[args.Label]++
	n := c.counts[args.Label]
	c.mu.Unlock()
	b := []byte(fmt.Sprintf(`{"label":%q,"execution":%d}`, args.Label, n))
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, RawStructuredContent: b}, nil
}

func (c *Counter) gate(label string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.gates[label]
	if !ok {
		g = make(chan struct{})
		c.gates[label] = g
	}
	return g
}

// Started delivers the label of each held call once it is running.
func (c *Counter) Started() <-chan string { return c.started }

// Release lets the held calls of label finish (and any later one with that label pass at once).
func (c *Counter) Release(label string) {
	g := c.gate(label)
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

// Count is how many times calls with label ran to completion.
func (c *Counter) Count(label string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[label]
}
