package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingBody) Close() error { return nil }

// openSession initializes a 2025-11-25 session on h and returns its id.
func openSession(t *testing.T, h http.Handler) string {
	t.Helper()
	init := serve(h, http.MethodPost, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	t.Cleanup(func() { serve(h, http.MethodDelete, sid, "", nil) })
	if a := serve(h, http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); a.Code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", a.Code, a.Body)
	}
	return sid
}

// postBody posts body on session sid of h; a negative length leaves the
// length unknown (as a chunked body is).
func postBody(h http.Handler, sid string, body *countingBody, length int64) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	r.Body, r.ContentLength = body, length
	if length < 0 {
		r.TransferEncoding = []string{"chunked"}
	}
	r.Host = "127.0.0.1:8080"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	for k, v := range map[string]string{"Authorization": "Bearer alice", "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"} {
		r.Header.Set(k, v)
	}
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestOversizedBodyIs413: a body over listen.max_body_bytes is answered
// 413 with a JSON-RPC error, on the fast path and through mcp-go, with and
// without Content-Length; with one, nothing of the body is read (issue 16,
// item 7: it was a -32700 parse error with HTTP 400).
func TestOversizedBodyIs413(t *testing.T) {
	d := newDifferential(t) // MaxBodyBytes: 1 MiB
	const limit = 1 << 20
	over := toolsCallBody(`7`, `{"name":"hostile__echo","arguments":{"blob":"`+strings.Repeat("a", 5<<20)+`"}}`)
	for _, c := range []struct {
		name    string
		h       http.Handler
		session bool
		known   bool
	}{
		{"fast path, Content-Length", d.fast, true, true},
		{"fast path, no Content-Length", d.fast, true, false},
		{"mcp-go, Content-Length", d.slow, true, true},
		{"mcp-go, no Content-Length", d.slow, true, false},
		{"no session, Content-Length", d.fast, false, true},
		{"no session, no Content-Length", d.fast, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sid := ""
			if c.session {
				sid = openSession(t, c.h)
			}
			d.echo.take()
			body := &countingBody{r: strings.NewReader(over)}
			length := int64(len(over))
			if !c.known {
				length = -1
			}
			w := postBody(c.h, sid, body, length)
			if w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413; body %.200s", w.Code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatalf("body is not JSON-RPC: %v: %s", err, w.Body)
			}
			if resp.JSONRPC != "2.0" || string(resp.ID) != "null" || resp.Error.Code != -32600 ||
				resp.Error.Message != "request body is over the 1048576 byte limit (listen.max_body_bytes)" {
				t.Errorf("answer %s", w.Body)
			}
			if c.known && body.read != 0 {
				t.Errorf("read %d bytes of a body whose Content-Length is over the cap", body.read)
			}
			if !c.known && body.read > limit+64<<10 {
				t.Errorf("read %d bytes of an unknown-length body, want about the cap (%d)", body.read, limit)
			}
			if calls := d.echo.take(); len(calls) != 0 {
				t.Errorf("the chain ran %d calls", len(calls))
			}
		})
	}
}

// TestBodyAtTheCapIsServed: a body of exactly the cap, of known or unknown
// length, is still a call, on both paths.
func TestBodyAtTheCapIsServed(t *testing.T) {
	d := newDifferential(t)
	prefix := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hostile__echo","arguments":{"blob":"`
	suffix := `"}}}`
	body := prefix + strings.Repeat("a", 1<<20-len(prefix)-len(suffix)) + suffix
	if len(body) != 1<<20 {
		t.Fatalf("body is %d bytes", len(body))
	}
	if !json.Valid([]byte(body)) {
		t.Fatal("body is not JSON")
	}
	for _, h := range []*HTTPEndpoint{d.fast, d.slow} {
		for _, known := range []bool{true, false} {
			sid := openSession(t, h)
			d.echo.take()
			length := int64(len(body))
			if !known {
				length = -1
			}
			w := postBody(h, sid, &countingBody{r: strings.NewReader(body)}, length)
			if w.Code != http.StatusOK {
				t.Fatalf("known length %v: status %d, want 200; %.200s", known, w.Code, w.Body)
			}
			if calls := d.echo.take(); len(calls) != 1 {
				t.Fatalf("known length %v: the chain ran %d calls, want 1", known, len(calls))
			}
		}
	}
}
