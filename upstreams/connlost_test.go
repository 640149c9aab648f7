package upstreams

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Requests waiting on an HTTP connection when it goes down all fail with
// one fault id, as the line transport's do, so the breaker counts the loss
// once rather than once per request (several calls in flight would
// otherwise open it at once).
func TestConnectionLossIsOneFault(t *testing.T) {
	mcpSrv := server.NewMCPServer("hold", "1")
	entered := make(chan struct{}, 8)
	mcpSrv.AddTool(mcp.NewTool("hold"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	httpSrv := server.NewStreamableHTTPServer(mcpSrv)
	ts := httptest.NewServer(httpSrv)
	t.Cleanup(func() {
		_ = httpSrv.Shutdown(context.Background())
		ts.Close()
	})
	ctx := callCtx(t, generous)
	conn, err := Dial(ctx, &Server{Name: "h", Transport: TransportHTTP, Egress: loopbackOK, URL: ts.URL + "/mcp"}, 1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const waiting = 3
	errs := make(chan error, waiting)
	for range waiting {
		go func() {
			_, err := conn.CallTool(ctx, "hold", []byte(`{}`))
			errs <- err
		}()
	}
	for range waiting {
		<-entered
	}
	conn.markDown(errors.New("the test took the connection down"))
	var fault uint64
	for i := range waiting {
		var ce *CallError
		if err := <-errs; !errors.As(err, &ce) || ce.Fault == 0 || !errors.Is(err, errConnLost) {
			t.Fatalf("request %d: %v, want a CallError with a fault id for the lost connection", i, err)
		} else if fault != 0 && ce.Fault != fault {
			t.Fatalf("request %d: fault %d, the others %d: one loss, one fault", i, ce.Fault, fault)
		} else {
			fault = ce.Fault
		}
	}
}
