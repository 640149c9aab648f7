package conformanceserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// rawSession speaks Streamable HTTP by hand, to see what a client library would hide: event IDs,
// retry fields, the exact schema bytes, HTTP statuses.
type rawSession struct {
	t   *testing.T
	url string
	hc  *http.Client
	id  string // Mcp-Session-Id
}

func newRawSession(t *testing.T, endpoint string) *rawSession {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	s := &rawSession{t: t, url: endpoint, hc: hc}
	resp := s.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	readAll(t, resp)
	s.id = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || s.id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, s.id)
	}
	if resp := s.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", resp.Status)
	} else {
		readAll(t, resp)
	}
	return s
}

// do sends one request within the session (once there is one) and returns the response unread.
func (s *rawSession) do(method, body string, header map[string]string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(testContext(s.t), method, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		req.Host = h
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type sseEvent struct{ id, retry, data string }

// readEvents reads an SSE body to its end. Events without data lines are kept (a priming event
// has one empty data line).
func readEvents(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	defer resp.Body.Close()
	var events []sseEvent
	var cur sseEvent
	seen := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if seen {
				events = append(events, cur)
			}
			cur, seen = sseEvent{}, false
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		seen = true
		switch field {
		case "id":
			cur.id = value
		case "retry":
			cur.retry = value
		case "data":
			cur.data += value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

// TestToolsListKeepsSchema2020Keywords checks the bytes on the wire: mcp-go's own client would
// drop $schema and friends before a test could see them.
func TestToolsListKeepsSchema2020Keywords(t *testing.T) {
	s := newRawSession(t, startHTTP(t))
	body := readAll(t, s.do(http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil))
	var msg struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	for _, tool := range msg.Result.Tools {
		if tool.Name == "json_schema_2020_12_tool" {
			var got, want any
			_ = json.Unmarshal(tool.InputSchema, &got)
			_ = json.Unmarshal([]byte(schema2020), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("inputSchema = %s, want %s", tool.InputSchema, schema2020)
			}
			return
		}
	}
	t.Fatalf("json_schema_2020_12_tool not listed: %s", body)
}

// TestStreamPolling walks SEP-1699 the way the server-sse-polling scenario does: the call's
// stream carries only a priming event and ends; a GET with that event's ID gets the answer, once.
func TestStreamPolling(t *testing.T) {
	s := newRawSession(t, startHTTP(t))
	resp := s.do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`, nil)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("POST: %s %s", resp.Status, ct)
	}
	events := readEvents(t, resp)
	if len(events) != 1 || !isPollEventID(events[0].id) || events[0].retry != "100" || events[0].data != "" {
		t.Fatalf("POST stream = %+v, want only a priming event", events)
	}
	prime := events[0].id

	wrong := []struct {
		name string
		hdr  map[string]string
	}{
		{"unknown ID", map[string]string{"Last-Event-ID": pollIDPrefix + "NOPE"}},
		{"other session", map[string]string{"Last-Event-ID": prime, "Mcp-Session-Id": "mcp-session-other"}},
	}
	for _, w := range wrong {
		if resp := s.do(http.MethodGet, "", w.hdr); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", w.name, resp.Status)
		} else {
			readAll(t, resp)
		}
	}

	resp = s.do(http.MethodGet, "", map[string]string{"Last-Event-ID": prime})
	events = readEvents(t, resp)
	if len(events) != 1 {
		t.Fatalf("resumed stream = %+v, want the answer", events)
	}
	var answer struct {
		ID     int                `json:"id"`
		Result mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(events[0].data), &answer); err != nil || answer.ID != 7 ||
		!strings.Contains(fmt.Sprint(answer.Result.Content), "answer delivered on the resumed stream") {
		t.Fatalf("answer = %s (%v)", events[0].data, err)
	}

	if resp := s.do(http.MethodGet, "", map[string]string{"Last-Event-ID": prime}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("second resume: %s, want 400 (the answer was collected)", resp.Status)
	} else {
		readAll(t, resp)
	}
}

// TestReconnectionThroughClients: mcp-go's client resumes a polled stream by itself before
// 2026-07-28; elsewhere the tool does not close anything and answers directly.
func TestReconnectionThroughClients(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			want := "stream was not closed"
			if tr.name == "http-2025-11-25" {
				want = "answer delivered on the resumed stream"
			}
			if text := onlyText(t, callTool(t, tr.connect(t), "test_reconnection", nil)); !strings.Contains(text, want) {
				t.Errorf("text = %q, want it to say %q", text, want)
			}
		})
	}
}

func TestRebindingGuard(t *testing.T) {
	endpoint := startHTTP(t)
	u, _ := url.Parse(endpoint)
	port := u.Port()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	cases := []struct {
		name, host, origin string
		want               int
	}{
		{"default", "", "", http.StatusOK},
		{"localhost host and origin", "localhost:" + port, "http://localhost:" + port, http.StatusOK},
		{"ipv6 loopback", "[::1]:" + port, "http://[::1]:" + port, http.StatusOK},
		{"rebound host", "evil.example.com", "http://evil.example.com", http.StatusForbidden},
		{"rebound host, no origin", "evil.example.com:" + port, "", http.StatusForbidden},
		{"foreign origin", "", "http://evil.example.com", http.StatusForbidden},
		{"opaque origin", "", "null", http.StatusForbidden},
	}
	s := &rawSession{t: t, url: endpoint, hc: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(s.hc.CloseIdleConnections)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			hdr := map[string]string{"Host": tc.host}
			if tc.origin != "" {
				hdr["Origin"] = tc.origin
			}
			resp := s.do(http.MethodPost, init, hdr)
			readAll(t, resp)
			if resp.StatusCode != tc.want {
				t.Errorf("status %s, want %d", resp.Status, tc.want)
			}
		})
	}
	t.Run("resume path", func(t *testing.T) {
		s.t = t
		resp := s.do(http.MethodGet, "", map[string]string{"Host": "evil.example.com", "Last-Event-ID": pollIDPrefix + "X"})
		readAll(t, resp)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %s, want 403", resp.Status)
		}
	})
}

func TestHTTPEdges(t *testing.T) {
	endpoint := startHTTP(t)
	s := &rawSession{t: t, url: endpoint, hc: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(s.hc.CloseIdleConnections)
	t.Run("other path", func(t *testing.T) {
		s.t, s.url = t, strings.TrimSuffix(endpoint, endpointPath)+"/other"
		if resp := s.do(http.MethodGet, "", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %s, want 404", resp.Status)
		} else {
			readAll(t, resp)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		s.t, s.url = t, endpoint
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", maxRequestBody) + `"}}`
		if text := readAll(t, s.do(http.MethodPost, body, nil)); !strings.Contains(text, "request body too large") {
			t.Errorf("answer %q, want a body-too-large error", text)
		}
	})
}

// TestShutdownReleasesParkedCall: a call closed for polling and never collected does not keep
// Shutdown (or a goroutine) waiting, and cannot be collected afterwards.
func TestShutdownReleasesParkedCall(t *testing.T) {
	h := NewHTTPHandler(New())
	ts := httptest.NewServer(h)
	defer ts.Close()
	s := newRawSession(t, ts.URL+endpointPath)
	events := readEvents(t, s.do(http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_reconnection"}}`, nil))
	if len(events) != 1 || !isPollEventID(events[0].id) {
		t.Fatalf("POST stream = %+v", events)
	}
	if err := h.Shutdown(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if resp := s.do(http.MethodGet, "", map[string]string{"Last-Event-ID": events[0].id}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("resume after Shutdown: %s, want 400", resp.Status)
	} else {
		readAll(t, resp)
	}
}

// TestDetachableWriterRefusesStartedResponse: the priming event must open the stream, so a call
// whose response already started cannot be closed for polling.
func TestDetachableWriterRefusesStartedResponse(t *testing.T) {
	rec := httptest.NewRecorder()
	w := newDetachableWriter(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "data: {}\n\n")
	if w.detach(pollIDPrefix+"x", pollRetry) {
		t.Fatal("detach after the response started")
	}
	if got := rec.Body.String(); got != "data: {}\n\n" {
		t.Errorf("body = %q", got)
	}
	select {
	case <-w.detached:
		t.Error("detached channel closed")
	default:
	}
}

// TestNotificationsPrecedeAnswerOnTheCallsStream: with the client's GET stream open (as the
// TypeScript SDK keeps one), progress and logs still travel on the call's own POST stream, all
// before the answer, as the suite's reference server writes them; mcp-go alone would let the GET
// stream take some (trap 11) and could write the last after the answer (trap 5).
func TestNotificationsPrecedeAnswerOnTheCallsStream(t *testing.T) {
	s := newRawSession(t, startHTTP(t))
	get := s.do(http.MethodGet, "", map[string]string{"Accept": "text/event-stream"})
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", get.Status)
	}
	readAll(t, s.do(http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, nil))
	for i := range 20 {
		for _, call := range []struct{ tool, method string }{
			{"test_tool_with_progress", "notifications/progress"}, {"test_tool_with_logging", "notifications/message"},
		} {
			resp := s.do(http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":`+
				`{"name":%q,"arguments":{},"_meta":{"progressToken":"p%d"}}}`, 10+i, call.tool, i), nil)
			var got []string
			for _, e := range readEvents(t, resp) {
				var msg struct {
					Method string          `json:"method"`
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal([]byte(e.data), &msg); err != nil {
					t.Fatalf("event %q: %v", e.data, err)
				}
				if msg.Result != nil {
					msg.Method = "result"
				}
				got = append(got, msg.Method)
			}
			want := []string{call.method, call.method, call.method, "result"}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("call %d of %s: events %q, want %q", i, call.tool, got, want)
			}
		}
	}
}
