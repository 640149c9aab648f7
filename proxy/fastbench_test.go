package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
)

// benchSession is a registered client session, for the benchmarks.
type benchSession struct{ id string }

func (b *benchSession) Initialize()                                         {}
func (b *benchSession) Initialized() bool                                   { return true }
func (b *benchSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (b *benchSession) SessionID() string                                   { return b.id }

const benchSID = "mcp-session-00000000-0000-0000-0000-000000000001"

// benchFast is a fast path with one registered session, a request of
// that session to post bodies on, and a call's context as serve makes it.
func benchFast() (*fastCalls, *http.Request, context.Context) {
	s := &Server{log: slog.New(slog.DiscardHandler), mcp: server.NewMCPServer("bench", "1")}
	e := &clientSession{}
	var cs server.ClientSession = &benchSession{id: benchSID}
	e.cs.Store(&cs)
	s.sessions.Store(benchSID, e)
	f := &fastCalls{srv: s, now: time.Now}
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	r.Host = "127.0.0.1:8080"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Mcp-Session-Id", benchSID)
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	ctx := s.mcp.WithContext(WithSubject(context.Background(), authz.Subject{Principal: "alice"}), cs)
	return f, r, ctx
}

var benchBodies = map[string]string{
	"plain": `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ping 1"}}}`,
	"meta":  `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ping 1"},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`,
}

// BenchmarkFastTake is the fast path's decision (headers, session, the
// body's one decoding) and the Call built from the request.
func BenchmarkFastTake(b *testing.B) {
	for _, name := range []string{"plain", "meta"} {
		body := []byte(benchBodies[name])
		b.Run(name, func(b *testing.B) {
			f, r, ctx := benchFast()
			b.ReportAllocs()
			for b.Loop() {
				r.Body = io.NopCloser(bytes.NewReader(body))
				_, req, took := f.take(r)
				if took != tookCall {
					b.Fatal("not taken")
				}
				params := req.params()
				if call := f.srv.callFrom(ctx, &params); call.Name != "echo" {
					b.Fatal(call.Name)
				}
			}
		})
	}
}

// BenchmarkFastAnswer is the fast path's encoding of the usual answer, as
// a 2025-11-25 and as a 2026-07-28 call gets it, and of a 1 MiB text.
//
//	go test ./proxy -run XXX -bench FastAnswer -benchmem
func BenchmarkFastAnswer(b *testing.B) {
	plain := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(`{"found":true}`)},
		StructuredContent: json.RawMessage(`{"ok":true,"data":{"found":true},"error_code":null,"message":null,"retryable":false}`)}
	modern := (&Server{identity: mcp.Implementation{Name: "toolgate", Version: "dev"}}).decorateModern(plain)
	big := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(strings.Repeat("x", 1<<20))},
		StructuredContent: json.RawMessage(`{"ok":true,"data":"` + strings.Repeat("x", 1<<20) + `"}`)}
	for name, res := range map[string]*mcp.CallToolResult{"2025-11-25": plain, "2026-07-28": modern, "1MiB-text": big} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeAnswer(json.RawMessage(`17`), res, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFastTakeModern is BenchmarkFastTake for a 2026-07-28 call,
// whose body is decoded once more with encoding/json (fastmodern.go).
func BenchmarkFastTakeModern(b *testing.B) {
	body := []byte(modernCallBody(`17`, "echo", `"progressToken":"p",`))
	f, r, _ := benchFast()
	for k, v := range modernHeaders("echo") {
		r.Header.Set(k, v)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Body = io.NopCloser(bytes.NewReader(body))
		if _, req, took := f.take(r); took != tookCall || req.modern == nil {
			b.Fatal("not taken")
		}
	}
}
