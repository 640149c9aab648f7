package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// received records the JSON-RPC messages an HTTP upstream was POSTed, and
// signals notice for each notifications/cancelled, and closes callEnded when the POST of a tools/call ends (its stream closed).
type received struct {
	next      http.Handler
	mu        sync.Mutex
	messages  []json.RawMessage
	callEnded chan struct{}
	notice    chan struct{} // a notifications/cancelled arrived
	endOnce   sync.Once
}

func (r *received) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		r.next.ServeHTTP(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.messages = append(r.messages, body)
	r.mu.Unlock()
	if bytes.Contains(body, []byte(mcp.MethodNotificationCancelled)) {
		select {
		case r.notice <- struct{}{}:
		default:
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.next.ServeHTTP(w, req)
	var msg struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method == string(mcp.MethodToolsCall) {
		<-req.Context().Done() // the gateway closed the call's stream (or the server shut down)
		r.endOnce.Do(func() { close(r.callEnded) })
	}
}

// cancellations returns the requestId of every notifications/cancelled
// received.
func (r *received) cancellations(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, m := range r.messages {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if err := json.Unmarshal(m, &msg); err != nil {
			t.Fatalf("message %s: %v", m, err)
		}
		if msg.Method == string(mcp.MethodNotificationCancelled) {
			ids = append(ids, string(msg.Params.RequestID))
		}
	}
	return ids
}

// A call the caller gives up on is cancelled upstream the way its era
// says: a 2025 Streamable HTTP upstream is sent notifications/cancelled
// naming the request; a 2026-07-28 one only sees the request's stream
// close, which is that era's cancellation, and no notice it does not
// expect (one keyed by request id alone could cancel another replica's
// request with the same id). Stdio keeps the notice:
// TestHostileStdioModes.
func TestCancellationReachesAnHTTPUpstreamAsItsEraSays(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		notices  int
	}{{mcp.ProtocolVersion20251125, 1}, {mcp.ProtocolVersion20260728, 0}} {
		t.Run(tc.protocol, func(t *testing.T) {
			mcpSrv := server.NewMCPServer("hold", "1")
			entered := make(chan struct{}, 1)
			mcpSrv.AddTool(mcp.NewTool("hold"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				entered <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			})
			httpSrv := server.NewStreamableHTTPServer(mcpSrv)
			rec := &received{next: httpSrv, callEnded: make(chan struct{}), notice: make(chan struct{}, 4)}
			ts := httptest.NewServer(rec)
			t.Cleanup(func() {
				_ = httpSrv.Shutdown(context.Background())
				ts.Close()
			})
			ctx := callCtx(t, generous)
			conn, err := Dial(ctx, &Server{Name: "h", Transport: TransportHTTP, Egress: loopbackOK, URL: ts.URL + "/mcp", Protocol: tc.protocol},
				1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			callCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := conn.CallTool(callCtx, "hold", json.RawMessage(`{}`))
				done <- err
			}()
			select {
			case <-entered:
			case <-time.After(generous):
				t.Fatal("the call never reached the upstream")
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled call: %v", err)
			}
			select {
			case <-rec.callEnded:
			case <-time.After(generous):
				t.Fatal("the call's stream was not closed")
			}
			defer conn.Close()
			if tc.notices > 0 {
				// The call's own notice, sent by a goroutine it started.
				select {
				case <-rec.notice:
				case <-time.After(generous):
					t.Fatal("no notifications/cancelled arrived")
				}
			}
			// Close would abort a notice still in flight, so the decision
			// is also checked synchronously: send one for the same id.
			conn.cancelUpstream(mcp.NewRequestId("gw-1"), context.Canceled)
			if ids := rec.cancellations(t); len(ids) != 2*tc.notices {
				t.Fatalf("notifications/cancelled received for %v, want %d", ids, 2*tc.notices)
			}
		})
	}
}
