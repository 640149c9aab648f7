package conformanceserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// mcp-go v1.2.1 starts a session's listening pump when a GET stream
		// arrives; a GET that lands while Shutdown runs gets a pump that
		// Shutdown has already passed by, and it ends only with the process.
		// Seen once in CI under load; the race is inside mcp-go
		// (streamable_http_resume.go), not in this package.
		goleak.IgnoreTopFunction("github.com/mark3labs/mcp-go/server.(*StreamableHTTPServer).startListeningPump.func1"),
	)
}

// generous bounds every wait for something that should happen quickly; it is a deadline for a
// hang, never a sleep.
const generous = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	t.Cleanup(cancel)
	return ctx
}

// startHTTP serves a fresh server on a loopback httptest listener and returns its /mcp URL.
// Cleanup shuts the handler down before the listener, as Main does.
func startHTTP(t *testing.T) string {
	t.Helper()
	url, _ := startHTTPWatched(t)
	return url
}

// startHTTPWatched is startHTTP that also reports each GET (listening
// stream) request as it arrives.
func startHTTPWatched(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	h := NewHTTPHandler(New())
	gets := make(chan struct{}, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select {
			case gets <- struct{}{}:
			default:
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), generous)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		ts.Close()
	})
	return ts.URL + endpointPath, gets
}

// A transport is one way of reaching the server; every client-level test runs over each.
type transportCase struct {
	name    string
	modern  bool // protocol 2026-07-28: no sessions, no resources/subscribe
	connect func(t *testing.T, opts ...client.ClientOption) *client.Client
}

var transports = []transportCase{
	{name: "inprocess-2025-11-25", connect: connectInProcess(mcp.LATEST_LEGACY_PROTOCOL_VERSION)},
	{name: "inprocess-2026-07-28", modern: true, connect: connectInProcess(mcp.ProtocolVersion20260728)},
	{name: "http-2025-11-25", connect: connectHTTP(mcp.LATEST_LEGACY_PROTOCOL_VERSION)},
	{name: "http-2026-07-28", modern: true, connect: connectHTTP(mcp.ProtocolVersion20260728)},
}

func connectInProcess(version string) func(*testing.T, ...client.ClientOption) *client.Client {
	return func(t *testing.T, opts ...client.ClientOption) *client.Client {
		t.Helper()
		c, err := client.NewInProcessClientWithOptions(New(), append(opts, client.WithProtocolVersion(version))...)
		if err != nil {
			t.Fatal(err)
		}
		return initialized(t, c)
	}
}

func connectHTTP(version string) func(*testing.T, ...client.ClientOption) *client.Client {
	return func(t *testing.T, opts ...client.ClientOption) *client.Client {
		t.Helper()
		// A private http.Transport, so that its keep-alive goroutines end with the test.
		hc := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(hc.CloseIdleConnections)
		topts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(hc)}
		if !mcp.IsModernProtocol(version) {
			// mcp-go's server sends sampling/createMessage only on the GET stream, never on the
			// call's own POST stream (pinned by TestLegacySamplingNeedsListeningStream).
			topts = append(topts, transport.WithContinuousListening())
		}
		url, gets := startHTTPWatched(t)
		tr, err := transport.NewStreamableHTTP(url, topts...)
		if err != nil {
			t.Fatal(err)
		}
		c := initialized(t, client.NewClient(tr, append(opts, client.WithProtocolVersion(version))...))
		if !mcp.IsModernProtocol(version) {
			// mcp-go's client opens its listening stream asynchronously
			// after initialize, and a sampling request the server sends
			// before that stream is up can be lost: wait for the GET, then
			// one round trip so the server has set the stream up.
			select {
			case <-gets:
			case <-testContext(t).Done():
				t.Fatal("the client never opened its listening stream")
			}
			if err := c.Ping(testContext(t)); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
}

func initialized(t *testing.T, c *client.Client) *client.Client {
	t.Helper()
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "conformanceserver-test", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(testContext(t), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func onlyText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d: %#v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

// fakeLLM answers sampling requests and records them.
type fakeLLM struct {
	mu  sync.Mutex
	got []mcp.CreateMessageRequest
}

func (f *fakeLLM) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	f.mu.Lock()
	f.got = append(f.got, req)
	f.mu.Unlock()
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled answer")},
		Model:           "fake-model",
		StopReason:      "endTurn",
	}, nil
}

func (f *fakeLLM) requests() []mcp.CreateMessageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mcp.CreateMessageRequest(nil), f.got...)
}

// fakeUser accepts every elicitation with a fixed answer and records the requests.
type fakeUser struct {
	mu     sync.Mutex
	got    []mcp.ElicitationRequest
	answer map[string]any
}

func (f *fakeUser) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	f.mu.Lock()
	f.got = append(f.got, req)
	f.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: f.answer,
	}}, nil
}

func (f *fakeUser) requests() []mcp.ElicitationRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mcp.ElicitationRequest(nil), f.got...)
}

// notifications collects the notifications of one method a client receives.
func notifications(c *client.Client, method string) <-chan mcp.JSONRPCNotification {
	ch := make(chan mcp.JSONRPCNotification, 64)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == method {
			select {
			case ch <- n:
			default: // more than the test waits for; never block the transport's read loop
			}
		}
	})
	return ch
}

// receive waits for n notifications.
func receive(t *testing.T, ch <-chan mcp.JSONRPCNotification, n int) []mcp.JSONRPCNotification {
	t.Helper()
	ctx := testContext(t)
	var got []mcp.JSONRPCNotification
	for len(got) < n {
		select {
		case x := <-ch:
			got = append(got, x)
		case <-ctx.Done():
			t.Fatalf("got %d of %d notifications", len(got), n)
		}
	}
	return got
}
