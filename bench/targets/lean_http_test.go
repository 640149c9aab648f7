package targets

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// exchange is one HTTP request the client made, as the client saw it.
type exchange struct {
	method, session, contentType string
	status                       int
}

// recorder is the client's transport, remembering every exchange.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, exchange{req.Method, req.Header.Get("Mcp-Session-Id"), mediaType(resp.Header.Get("Content-Type")), resp.StatusCode})
	return resp, nil
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

func newRecorder() (*recorder, *http.Client) {
	rec := &recorder{base: &http.Transport{MaxIdleConnsPerHost: 16}}
	return rec, &http.Client{Transport: rec}
}

// echoServer is mcp-go's Streamable HTTP server with the echo tool; with
// notify, the tool first sends a notification, so mcp-go answers the call
// with an event stream instead of JSON.
func echoServer(notify bool) http.Handler {
	s := server.NewMCPServer("echo", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if notify {
				// Fails unless the client sent notifications/initialized.
				err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message",
					map[string]any{"level": "info", "data": "working"})
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
			}
			return mcp.NewToolResultText(req.GetString("message", "")), nil
		})
	return server.NewStreamableHTTPServer(s)
}

// TestLeanHTTPMCPGoServer opens lean sessions on mcp-go's own server and
// calls the echo tool: the answer comes as JSON, or as an event stream
// with a notification first. Closing sends DELETE with the session id.
func TestLeanHTTPMCPGoServer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notify   bool
		wantType string
	}{
		{"json", false, "application/json"},
		{"event stream", true, "text/event-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(echoServer(tc.notify))
			defer srv.Close()
			rec, hc := newRecorder()
			defer hc.CloseIdleConnections()
			ctx := context.Background()
			sessions, closeSessions, err := openLeanHTTPSessions(ctx, 2, hc, srv.URL+"/mcp", nil, "echo")
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range sessions {
				for seq := range 3 {
					if err := s.Call(ctx, int64(10*i+seq)); err != nil {
						t.Fatalf("session %d call %d: %v", i, seq, err)
					}
				}
			}
			closeSessions()
			checkExchanges(t, rec.exchanges(), 2, 3, tc.wantType)
		})
	}
}

// checkExchanges wants, per session, an initialize answered with JSON,
// notifications/initialized accepted, calls answered as wantType, and a
// DELETE of the session.
func checkExchanges(t *testing.T, seen []exchange, sessions, calls int, wantType string) {
	t.Helper()
	byMethod := map[string][]exchange{}
	for _, e := range seen {
		byMethod[e.method] = append(byMethod[e.method], e)
	}
	if got, want := len(byMethod["POST"]), sessions*(2+calls); got != want {
		t.Errorf("%d POSTs, want %d: %+v", got, want, seen)
	}
	answered := 0
	for _, e := range byMethod["POST"] {
		if e.contentType == wantType && e.session != "" {
			answered++
		}
	}
	if answered != sessions*calls {
		t.Errorf("%d calls answered as %s in a session, want %d: %+v", answered, wantType, sessions*calls, seen)
	}
	deletes := byMethod["DELETE"]
	if len(deletes) != sessions {
		t.Fatalf("%d DELETEs, want %d", len(deletes), sessions)
	}
	for _, d := range deletes {
		if d.session == "" || d.status != http.StatusOK {
			t.Errorf("DELETE %+v, want a session id and 200", d)
		}
	}
}

// fakeAnswer is what a fake server answers a tools/call with.
type fakeAnswer func(id json.RawMessage, msg string) (contentType, body string, status int)

// jsonAnswer answers result, MSG in it replaced by the call's message.
func jsonAnswer(result string) fakeAnswer {
	return func(id json.RawMessage, msg string) (string, string, int) {
		return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, strings.ReplaceAll(result, "MSG", msg)), 200
	}
}

// fakeServer answers the handshake itself and every tools/call with
// answer, after checking the headers a session's call must carry.
func fakeServer(t *testing.T, answer fakeAnswer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Message string `json:"message"`
				} `json:"arguments"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodDelete {
			return
		}
		if err := json.Unmarshal(body, &req); err != nil || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, fmt.Sprintf("bad request (%v) %q", err, body), http.StatusBadRequest)
			return
		}
		switch req.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}`, req.ID, protocolVersion)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/call":
			if err := callHeaders(r.Header); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ct, out, status := answer(req.ID, req.Params.Arguments.Message)
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(status)
			io.WriteString(w, out)
		default:
			http.Error(w, "unexpected "+req.Method, http.StatusBadRequest)
		}
	})
}

// callHeaders checks what every tools/call of a session carries.
func callHeaders(h http.Header) error {
	want := map[string]string{"Mcp-Session-Id": "s1", "Mcp-Protocol-Version": protocolVersion,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	for k, v := range want {
		if got := h.Get(k); got != v {
			return fmt.Errorf("header %s: %q, want %q", k, got, v)
		}
	}
	return nil
}

// TestLeanHTTPAnswers checks the lean session's reading of answers against
// a fake server: what counts as the call succeeding and what as an error.
func TestLeanHTTPAnswers(t *testing.T) {
	sse := func(events string) fakeAnswer {
		return func(id json.RawMessage, msg string) (string, string, int) {
			return "text/event-stream", strings.NewReplacer("ID", string(id), "MSG", msg).Replace(events), 200
		}
	}
	for _, tc := range []struct {
		name    string
		answer  fakeAnswer
		wantErr string // "" for success
	}{
		{"json", jsonAnswer(`{"content":[{"type":"text","text":"MSG"}]}`), ""},
		{"json with charset", func(id json.RawMessage, msg string) (string, string, int) {
			_, body, _ := jsonAnswer(`{"content":[{"type":"text","text":"MSG"}]}`)(id, msg)
			return "application/json; charset=utf-8", body, 200
		}, ""},
		{"text in parts", jsonAnswer(`{"content":[{"type":"text","text":"echo: "},{"type":"image","data":"x"},{"type":"text","text":"MSG"}]}`), ""},
		{"event stream after a notification and a server request", sse(
			": comment\nevent: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
				"data: {\"jsonrpc\":\"2.0\",\"id\":\"srv\",\"method\":\"ping\"}\n\n" +
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\r\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"MSG\"}]}}\r\n\r\n"), ""},
		{"event stream primed with an empty event", sse("id: 0\ndata:\n\nevent: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"MSG\"}]}}\n\n"), ""},
		{"event stream ending without a blank line", sse(`data: {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"MSG"}]}}`), ""},
		{"event stream without the answer", sse("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"), "event stream ended"},
		{"another id", func(id json.RawMessage, msg string) (string, string, int) {
			return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":9999,"result":{"content":[{"type":"text","text":%q}]}}`, msg), 200
		}, "want"},
		{"missing text", jsonAnswer(`{"content":[{"type":"text","text":"pong"}]}`), "lacks"},
		{"no content", jsonAnswer(`{}`), "lacks"},
		{"tool error", jsonAnswer(`{"content":[{"type":"text","text":"MSG"}],"isError":true}`), "tool error"},
		{"JSON-RPC error", func(id json.RawMessage, _ string) (string, string, int) {
			return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown tool"}}`, id), 200
		}, "JSON-RPC error -32602"},
		{"HTTP error", func(json.RawMessage, string) (string, string, int) { return "text/plain", "overloaded", 503 }, "HTTP 503"},
		{"other content type", func(json.RawMessage, string) (string, string, int) { return "text/html", "<p>", 200 }, "content type"},
		{"not JSON", func(json.RawMessage, string) (string, string, int) { return "application/json", "{", 200 }, "answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(fakeServer(t, tc.answer))
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := openLeanHTTP(ctx, hc, srv.URL, map[string]string{"Authorization": "Bearer k"}, "echo")
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			err = s.Call(ctx, 42)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("call: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("call: error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestLeanHTTPHandshake checks that a session is refused when the
// handshake is not what every target must serve.
func TestLeanHTTPHandshake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session string
		version string
		wantErr string
	}{
		{"no session id", "", protocolVersion, "no Mcp-Session-Id"},
		{"another protocol", "s1", "2025-06-18", "chose protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.session != "" {
					w.Header().Set("Mcp-Session-Id", tc.session)
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":%q}}`, tc.version)
			}))
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			_, err := openLeanHTTP(context.Background(), hc, srv.URL, nil, "echo")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("open: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
