package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A call's progress notifications travel on the call's own stream, before
// its result, even while the client keeps a GET listening stream open and
// declared sampling (as the TypeScript SDK's clients do): a client drops
// progress that arrives after the result (issue 17, item 1). Each upstream
// writes its three notifications and the answer back to back, in order, as
// the conformance suite's reference server does: the test upstream over
// stdio (progress with ordered), and orderedProgressServer over Streamable
// HTTP (mcp-go's own servers write a tool's notifications from another
// goroutine than its answer, so some would reach the gateway after the
// answer, and be lost before the gateway had a say).
//
// TOOLGATE_PROGRESS_CALLS sets how many calls each upstream gets (200).
func TestProgressStaysOnTheCallStream(t *testing.T) {
	calls := 200
	if n, err := strconv.Atoi(os.Getenv("TOOLGATE_PROGRESS_CALLS")); err == nil && n > 0 {
		calls = n
	}
	ph := httptest.NewServer(&orderedProgressServer{})
	t.Cleanup(ph.Close)
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "ps", "")+fmt.Sprintf("  ph:\n    url: %q\n    egress: {allow: [loopback]}\n", ph.URL+"/mcp")))
	for _, server := range []string{"ps", "ph"} {
		t.Run(server, func(t *testing.T) {
			c := progressClient(t, url)
			c.awaitListening(t)
			const steps = 3
			late, before, after := 0, 0, 0
			for i := range calls {
				token := fmt.Sprintf("call-%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				req := mcp.CallToolRequest{}
				req.Params.Name = server + "__progress"
				req.Params.Arguments = json.RawMessage(fmt.Sprintf(`{"steps":%d,"ordered":true}`, steps))
				req.Params.Meta = &mcp.Meta{ProgressToken: token}
				res, err := c.CallTool(ctx, req)
				cancel()
				if err != nil || res.IsError {
					t.Fatalf("call %d: %v %+v", i, err, res)
				}
				n := c.count(token)
				before += n
				if n != steps {
					late++
				}
			}
			// What arrived after its result (on the GET stream) is counted
			// once the streams had a moment.
			time.Sleep(200 * time.Millisecond)
			for i := range calls {
				after += c.count(fmt.Sprintf("call-%d", i))
			}
			t.Logf("%s: %d of %d calls had all %d progress notifications before their result; per call %.2f before the result, %.2f in all",
				server, calls-late, calls, steps, float64(before)/float64(calls), float64(after)/float64(calls))
			if late > 0 {
				t.Errorf("%d of %d calls got their result before all their progress notifications", late, calls)
			}
		})
	}
}

// legacyEra is the protocol version of the tests' clients: the last with
// sessions, GET listening streams and server-to-client requests, which
// 2026-07-28 replaced.
const legacyEra = "2025-11-25"

// progressCounter is a client that counts the progress it receives per
// token, listens on a GET stream, and declares sampling.
type progressCounter struct {
	*client.Client
	mu       sync.Mutex
	received map[string]int
}

func progressClient(t *testing.T, url string) *progressCounter {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}),
		transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := &progressCounter{Client: client.NewClient(tr, client.WithSamplingHandler(sampler{}), client.WithProtocolVersion(legacyEra)), received: map[string]int{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		token, _ := n.Params.AdditionalFields["progressToken"].(string)
		c.mu.Lock()
		c.received[token]++
		c.mu.Unlock()
	})
	initClientVersion(t, c.Client, legacyEra)
	return c
}

func (c *progressCounter) count(token string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received[token]
}

// awaitListening gives mcp-go's client the moment it takes to open its GET
// stream after initialize: a ping answered means the session is up, and the
// GET was started with it.
func (c *progressCounter) awaitListening(t *testing.T) {
	t.Helper()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
}

// sampler answers sampling; the test's upstream never asks, but a client
// with a handler declares the capability.
type sampler struct{}

func (sampler) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled")}, Model: "test"}, nil
}

// An upstream's sampling request during a call reaches a client that
// declared sampling on the call's own stream (the fast path takes the call,
// where mcp-go's handler would send it on the GET stream), mcp-go's client
// answers it with a POST, and the upstream gets the answer.
func TestSamplingOnTheCallStream(t *testing.T) {
	up := httptest.NewServer(&orderedProgressServer{})
	t.Cleanup(up.Close)
	logs := &syncBuffer{}
	gw, code := startGateway(context.Background(), writeConfig(t, fmt.Sprintf("  pa:\n    url: %q\n    egress: {allow: [loopback]}\n", up.URL+"/mcp")),
		slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if gw == nil {
		t.Fatalf("gateway did not start (exit %d); log:\n%s", code, logs)
	}
	endpoint := gw.MCPHandler()
	srv := httptest.NewServer(endpoint)
	t.Cleanup(func() {
		srv.Close()
		_ = endpoint.Shutdown(context.Background())
		gw.Close()
	})
	for _, listening := range []bool{false, true} {
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey})}
		if listening {
			opts = append(opts, transport.WithContinuousListening())
		}
		tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", opts...)
		if err != nil {
			t.Fatal(err)
		}
		c := initClientVersion(t, client.NewClient(tr, client.WithSamplingHandler(sampler{}), client.WithProtocolVersion(legacyEra)), legacyEra)
		before := endpoint.FastCalls()
		for i := range 20 {
			res, env := callE2E(t, c, "pa__ask", `{}`)
			if env["ok"] != true || !strings.Contains(fmt.Sprint(res.Content), "sampled") {
				t.Fatalf("listening %v, call %d: %v %v\n%s", listening, i, env, res.Content, logs)
			}
		}
		if taken := endpoint.FastCalls() - before; taken != 20 {
			t.Errorf("listening %v: the fast path took %d of 20 calls", listening, taken)
		}
	}
}

// orderedProgressServer is a Streamable HTTP upstream of two tools that
// answers a call on an event stream: progress writes steps
// notifications/progress, then the answer, in that order; ask writes a
// sampling request, waits for the answer the gateway POSTs, and answers
// with it. It has no GET stream and no sessions.
type orderedProgressServer struct {
	mu      sync.Mutex
	asked   map[string]chan string
	counter int
}

func (s *orderedProgressServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "no listening stream", http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Params struct {
			Name            string `json:"name"`
			ProtocolVersion string `json:"protocolVersion"`
			Arguments       struct {
				Steps int `json:"steps"`
			} `json:"arguments"`
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}
	switch msg.Method {
	case "initialize":
		answer(fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"ordered","version":"1"}}`, msg.Params.ProtocolVersion))
	case "tools/list":
		answer(`{"tools":[{"name":"progress","inputSchema":{"type":"object"}},{"name":"ask","inputSchema":{"type":"object"}}]}`)
	case "ping":
		answer(`{}`)
	case "":
		s.mu.Lock()
		waiting := s.asked[string(msg.ID)]
		delete(s.asked, string(msg.ID))
		s.mu.Unlock()
		if waiting != nil {
			waiting <- string(msg.Result)
		}
		w.WriteHeader(http.StatusAccepted)
	case "tools/call":
		if msg.Params.Name == "ask" {
			s.ask(w, r, msg.ID, msg.Params.Meta.ProgressToken)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		steps := msg.Params.Arguments.Steps
		for i := 1; len(msg.Params.Meta.ProgressToken) > 0 && i <= steps; i++ {
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":%d,\"total\":%d}}\n\n",
				msg.Params.Meta.ProgressToken, i, steps)
		}
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done %d steps\"}]}}\n\n", msg.ID, steps)
	default:
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
	}
}

// ask is the ask tool: a sampling request on the call's stream, then,
// once the client answered, a progress notification when the call carries
// a progress token, and the answer with what the client said.
func (s *orderedProgressServer) ask(w http.ResponseWriter, r *http.Request, callID, progressToken json.RawMessage) {
	s.mu.Lock()
	s.counter++
	id := fmt.Sprintf(`"up-%d"`, s.counter)
	answered := make(chan string, 1)
	if s.asked == nil {
		s.asked = map[string]chan string{}
	}
	s.asked[id] = answered
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"2+2?\"}}],\"maxTokens\":5}}\n\n", id)
	w.(http.Flusher).Flush()
	var said string
	select {
	case said = <-answered:
	case <-r.Context().Done():
		return
	case <-time.After(10 * time.Second):
		said = "nothing"
	}
	text, _ := json.Marshal("client said " + said)
	if len(progressToken) > 0 {
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":1,\"total\":1}}\n\n", progressToken)
	}
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%s}]}}\n\n", callID, text)
}
