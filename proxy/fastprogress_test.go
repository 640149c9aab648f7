package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A fast call with a progress token writes its progress notifications on
// its own response, before the answer, even with the client's GET stream
// open: none reach the GET stream, where they would arrive after the
// answer (issue 17).
func TestFastProgressTravelsOnTheCallStream(t *testing.T) {
	d := newDifferential(t)
	srv := httptest.NewServer(d.fast)
	defer srv.Close()
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.open(`{}`)
	get := c.listen()
	defer get.stop()

	const calls = 20
	before := d.fast.FastCalls()
	for i := range calls {
		events := c.events(c.post(toolsCallBody(`7`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":"tok"}}`)))
		var progress []float64
		for j, e := range events {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Token    any     `json:"progressToken"`
					Progress float64 `json:"progress"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(e), &msg); err != nil {
				t.Fatalf("call %d: event %q: %v", i, e, err)
			}
			switch {
			case msg.Method == "notifications/progress" && msg.Params.Token == "tok" && j < len(events)-1:
				progress = append(progress, msg.Params.Progress)
			case string(msg.ID) == `7` && j == len(events)-1:
			default:
				t.Fatalf("call %d: event %d of %d is %s", i, j+1, len(events), e)
			}
		}
		if len(progress) != 3 || progress[0] != 0 || progress[1] != 50 || progress[2] != 100 {
			t.Fatalf("call %d: progress %v before the answer, want [0 50 100]", i, progress)
		}
	}
	if got := d.fast.FastCalls() - before; got != calls {
		t.Fatalf("the fast path took %d of %d calls", got, calls)
	}
	if leaked := get.stop(); strings.Contains(leaked, "notifications/progress") {
		t.Fatalf("progress reached the GET stream:\n%s", leaked)
	}
}

// httpClient speaks Streamable HTTP to an endpoint as alice.
type httpClient struct {
	t   *testing.T
	url string
	sid string
	// noVersion: requests after initialize carry no MCP-Protocol-Version
	// header, as a 2025-03-26 client's.
	noVersion bool
}

// open initializes a session with the capabilities given, and sends
// notifications/initialized.
func (c *httpClient) open(caps string) {
	c.t.Helper()
	c.initialize(caps)
	if resp := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %s", resp.Status)
	}
}

// initialize opens a session with initialize alone (mcp-go marks the
// session initialized there), without notifications/initialized.
func (c *httpClient) initialize(caps string) {
	c.t.Helper()
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+
		`,"clientInfo":{"name":"test","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" {
		c.t.Fatalf("initialize: %s", resp.Status)
	}
}

func (c *httpClient) do(method, body string) *http.Response {
	c.t.Helper()
	return c.doContext(context.Background(), method, body)
}

func (c *httpClient) doContext(ctx context.Context, method, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if !c.noVersion || c.sid == "" {
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// post sends body on the session and reads the whole answer.
func (c *httpClient) post(body string) *http.Response {
	c.t.Helper()
	resp := c.do(http.MethodPost, body)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	return resp
}

// events are the messages of an answer: its events when it is an event
// stream, else its one JSON body.
func (c *httpClient) events(resp *http.Response) []string {
	c.t.Helper()
	data, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		return []string{strings.TrimSpace(string(data))}
	}
	var events []string
	for line := range strings.Lines(string(data)) {
		if msg, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(msg))
		}
	}
	return events
}

// listening is an open GET stream.
type listening struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	got    strings.Builder
	once   sync.Once
}

// listen opens the session's GET stream and returns once it answered.
func (c *httpClient) listen() *listening {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.doContext(ctx, http.MethodGet, "")
	if resp.StatusCode != http.StatusOK {
		cancel()
		c.t.Fatalf("GET: %s", resp.Status)
	}
	l := &listening{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			l.mu.Lock()
			l.got.WriteString(lines.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	return l
}

// stop closes the stream and returns what it carried.
func (l *listening) stop() string {
	l.once.Do(func() {
		l.cancel()
		<-l.done
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got.String()
}
