package upstreams

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/testkit"
)

// fakePeer is the upstream's side of a lineTransport: it reads what the
// transport writes and writes lines for it to read.
type fakePeer struct {
	t     *testing.T
	tr    *lineTransport
	in    *bufio.Reader  // what the transport wrote
	inEnd io.Closer      // its read end
	out   *io.PipeWriter // what the transport reads
}

// newPeer starts a transport between pipes. At cleanup it closes both
// sides and checks that no goroutine is left.
func newPeer(t *testing.T) *fakePeer {
	t.Helper()
	before := goleak.IgnoreCurrent()
	toPeer, fromTransport := io.Pipe()
	toTransport, fromPeer := io.Pipe()
	p := &fakePeer{t: t, tr: newLineTransport(toTransport, fromTransport),
		in: bufio.NewReader(toPeer), inEnd: toPeer, out: fromPeer}
	if err := p.tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.tr.Close()
		p.out.Close()   // ends the read loop
		p.inEnd.Close() // fails a write still blocked
		goleak.VerifyNone(t, before)
	})
	return p
}

// send writes lines for the transport to read.
func (p *fakePeer) send(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.out, l+"\n"); err != nil {
			p.t.Fatalf("write %q: %v", l, err)
		}
	}
}

// next reads the next message the transport wrote.
func (p *fakePeer) next() map[string]json.RawMessage {
	p.t.Helper()
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		p.t.Fatalf("read: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		p.t.Fatalf("transport wrote %q: %v", line, err)
	}
	return m
}

type sent struct {
	resp *transport.JSONRPCResponse
	err  error
}

// request sends a request with id on a goroutine; the peer must read it.
func (p *fakePeer) request(ctx context.Context, id string) <-chan sent {
	done := make(chan sent, 1)
	go func() {
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: "tools/call",
			Params: toolCallParams{Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}}
		resp, err := p.tr.SendRequest(ctx, req)
		done <- sent{resp, err}
	}()
	return done
}

func waitSent(t *testing.T, c <-chan sent) sent {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(generous):
		t.Fatal("request did not return")
		return sent{}
	}
}

// The lines before the answer are skipped or dropped; the answer arrives.
func TestLineTransportSkipsWhatIsNotItsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string
		answer string
	}{
		{"log line skipped", []string{"this is not JSON", "  [info] started {x}"}, `{"jsonrpc":"2.0","id":"gw-1","result":{"ok":1}}`},
		{"not an object skipped", []string{`[1,2]`, `"gw-1"`, `42`, `null`, ``, "  \t"}, `{"jsonrpc":"2.0","id":"gw-1","result":{"ok":1}}`},
		{"no JSON-RPC message skipped", []string{`{"level":"info","msg":"a structured log line"}`, `{}`}, `{"jsonrpc":"2.0","id":"gw-1","result":{"ok":1}}`},
		{"malformed notifications and requests skipped", []string{
			`{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":"garbage"}`,
			`{"jsonrpc":"2.0","method":5,"id":"gw-1"}`,
			`{"jsonrpc":"2.0","method":{"x":1}}`,
			`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		}, `{"jsonrpc":"2.0","id":"gw-1","result":{"ok":1}}`},
		{"escaped id matched", nil, `{"jsonrpc":"2.0","id":"gw\u002d1","result":{"ok":1}}`},
		{"crlf line", nil, "{\"jsonrpc\":\"2.0\",\"id\":\"gw-1\",\"result\":{\"ok\":1}}\r"},
		{"no jsonrpc member", nil, `{"id":"gw-1","result":{"ok":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(t)
			done := p.request(context.Background(), "gw-1")
			p.next()
			p.send(tc.before...)
			p.send(tc.answer)
			s := waitSent(t, done)
			if s.err != nil || string(s.resp.Result) != `{"ok":1}` || idKey(s.resp.ID) != `"gw-1"` {
				t.Fatalf("got %+v, %v", s.resp, s.err)
			}
		})
	}
}

// An error answer carries the upstream's error.
func TestLineTransportErrorAnswer(t *testing.T) {
	p := newPeer(t)
	done := p.request(context.Background(), "gw-1")
	p.next()
	p.send(`{"jsonrpc":"2.0","id":"gw-1","error":{"code":-32602,"message":"bad args"}}`)
	s := waitSent(t, done)
	if s.err != nil || s.resp.Error == nil || s.resp.Error.Code != -32602 || s.resp.Error.Message != "bad args" {
		t.Fatalf("got %+v, %v", s.resp, s.err)
	}
}

// A line longer than the read buffer is assembled whole.
func TestLineTransportLongLine(t *testing.T) {
	p := newPeer(t)
	done := p.request(context.Background(), "gw-1")
	p.next()
	big := `{"text":"` + strings.Repeat("x", 3*lineReadSize) + `"}`
	p.send(`{"jsonrpc":"2.0","id":"gw-1","result":` + big + `}`)
	if s := waitSent(t, done); s.err != nil || string(s.resp.Result) != big {
		t.Fatalf("got %d bytes, %v", len(s.resp.Result), s.err)
	}
}

// Notifications reach the handler, in order, with their params.
func TestLineTransportNotifications(t *testing.T) {
	p := newPeer(t)
	got := make(chan mcp.JSONRPCNotification, 4)
	p.tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { got <- n })
	p.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tg-1","progress":2}}`,
		`{"jsonrpc":"2.0","id":null,"method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":[1]}`, // not an object: skipped
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	want := []string{"notifications/progress", "notifications/tools/list_changed", "notifications/message"}
	for i, method := range want {
		select {
		case n := <-got:
			if n.Method != method {
				t.Fatalf("notification %d: %s, want %s", i, n.Method, method)
			}
			if i == 0 && (n.Params.AdditionalFields["progressToken"] != "tg-1" || n.Params.AdditionalFields["progress"] != 2.0) {
				t.Fatalf("params %v", n.Params.AdditionalFields)
			}
		case <-time.After(generous):
			t.Fatalf("notification %d did not arrive", i)
		}
	}
}

// The upstream's requests are answered through the handler, or with
// method not found without one; a handler that blocks does not hold the
// read loop.
func TestLineTransportServerRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler bool
		want    string // the answer's result, or its error code
	}{
		{"with handler", true, `{"params":{"b":1,"a":9007199254740993}}`},
		{"without handler", false, fmt.Sprint(mcp.METHOD_NOT_FOUND)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(t)
			release := make(chan struct{})
			if tc.handler {
				p.tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
					<-release // waits for the client, as sampling does
					raw, _ := json.Marshal(map[string]any{"params": req.Params})
					return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: raw}, nil
				})
			} else {
				p.tr.SetRequestHandler(nil)
				close(release)
			}
			p.send(`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"b":1,"a":9007199254740993}}`)
			// Meanwhile the read loop goes on: the gateway's request is answered.
			done := p.request(context.Background(), "gw-1")
			var answer map[string]json.RawMessage
			for m := p.next(); ; m = p.next() {
				if m["method"] != nil {
					break
				}
				answer = m // without a handler, the answer may come first
			}
			p.send(`{"jsonrpc":"2.0","id":"gw-1","result":{}}`)
			if s := waitSent(t, done); s.err != nil {
				t.Fatal(s.err)
			}
			if tc.handler {
				close(release)
			}
			if answer == nil {
				answer = p.next()
			}
			checkServerAnswer(t, answer, tc.want)
		})
	}
}

// checkServerAnswer checks the answer to the upstream's request 7.
func checkServerAnswer(t *testing.T, m map[string]json.RawMessage, want string) {
	t.Helper()
	if string(m["method"]) != "" {
		t.Fatalf("expected the answer to request 7, got %s", m["method"])
	}
	if string(m["id"]) != "7" {
		t.Fatalf("answer id %s", m["id"])
	}
	if res, ok := m["result"]; ok {
		if string(res) != want {
			t.Fatalf("result %s, want %s", res, want)
		}
		return
	}
	var e mcp.JSONRPCErrorDetails
	if err := json.Unmarshal(m["error"], &e); err != nil || fmt.Sprint(e.Code) != want {
		t.Fatalf("error %s, want code %s", m["error"], want)
	}
}

// When the output ends, an answer already read is delivered, waiting
// requests fail with ErrTransportClosed, and so does every later one.
func TestLineTransportOutputEnds(t *testing.T) {
	p := newPeer(t)
	answered := p.request(context.Background(), "gw-1")
	p.next()
	waiting := p.request(context.Background(), "gw-2")
	p.next()
	p.send(`{"jsonrpc":"2.0","id":"gw-1","result":{"last":true}}`)
	p.out.Close()
	if s := waitSent(t, answered); s.err != nil || string(s.resp.Result) != `{"last":true}` {
		t.Fatalf("answer before EOF: %+v, %v", s.resp, s.err)
	}
	if s := waitSent(t, waiting); !errors.Is(s.err, transport.ErrTransportClosed) {
		t.Fatalf("in flight at EOF: %v", s.err)
	}
	waitClosed(t, p.tr)
	if s := waitSent(t, p.request(context.Background(), "gw-3")); !errors.Is(s.err, transport.ErrTransportClosed) {
		t.Fatalf("after EOF: %v", s.err)
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/cancelled"}}
	if err := p.tr.SendNotification(context.Background(), n); !errors.Is(err, transport.ErrTransportClosed) {
		t.Fatalf("notification after EOF: %v", err)
	}
}

func waitClosed(t *testing.T, tr *lineTransport) {
	t.Helper()
	deadline := time.Now().Add(generous)
	for !tr.isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("transport not closed")
		}
		time.Sleep(time.Millisecond)
	}
}

// Close fails what waits, closes the output, and can be called again.
func TestLineTransportClose(t *testing.T) {
	p := newPeer(t)
	waiting := p.request(context.Background(), "gw-1")
	p.next()
	if err := p.tr.Close(); err != nil {
		t.Fatal(err)
	}
	if s := waitSent(t, waiting); !errors.Is(s.err, transport.ErrTransportClosed) {
		t.Fatalf("in flight at Close: %v", s.err)
	}
	if _, err := p.in.ReadByte(); err != io.EOF {
		t.Fatalf("output after Close: %v", err)
	}
	if err := p.tr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Concurrent requests each get their own answer, whatever the order.
func TestLineTransportConcurrentRequests(t *testing.T) {
	p := newPeer(t)
	const n = 32
	results := make([]<-chan sent, n)
	for i := range n {
		results[i] = p.request(context.Background(), fmt.Sprintf("gw-%d", i))
	}
	ids := make([]json.RawMessage, n)
	for i := range n {
		ids[i] = p.next()["id"]
	}
	for i := n - 1; i >= 0; i-- { // answered in reverse order of arrival
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"for":%s}}`, ids[i], ids[i]))
	}
	for i, c := range results {
		s := waitSent(t, c)
		if want := fmt.Sprintf(`{"for":"gw-%d"}`, i); s.err != nil || string(s.resp.Result) != want {
			t.Fatalf("request %d got %+v, %v; want %s", i, s.resp, s.err, want)
		}
	}
}

// A cancelled request returns ctx.Err at once; its late answer is dropped
// and nothing is left waiting.
func TestLineTransportCancel(t *testing.T) {
	p := newPeer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := p.request(ctx, "gw-1")
	p.next()
	cancel()
	if s := waitSent(t, done); !errors.Is(s.err, context.Canceled) {
		t.Fatalf("got %v", s.err)
	}
	p.send(`{"jsonrpc":"2.0","id":"gw-1","result":{"late":true}}`)
	next := p.request(context.Background(), "gw-2")
	p.next()
	p.send(`{"jsonrpc":"2.0","id":"gw-2","result":{}}`)
	if s := waitSent(t, next); s.err != nil || string(s.resp.Result) != `{}` {
		t.Fatalf("got %+v, %v", s.resp, s.err)
	}
	p.tr.mu.Lock()
	left := len(p.tr.pending)
	p.tr.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d requests left waiting", left)
	}
}

// mcp-go's client sees the transport as bidirectional: after Start its
// own handler answers the upstream's ping.
func TestLineTransportUnderMCPClient(t *testing.T) {
	p := newPeer(t)
	c := client.NewClient(p.tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.send(`{"jsonrpc":"2.0","id":"ping-1","method":"ping"}`)
	m := p.next()
	if string(m["id"]) != `"ping-1"` || string(m["result"]) != `{}` {
		t.Fatalf("ping answered %v", m)
	}
}

// The request line is what json.Marshal writes, one line, and params that
// are not valid JSON are refused rather than spliced in.
func TestAppendRequestMatchesMarshal(t *testing.T) {
	meta := &callMeta{ProgressToken: "tg-1", Traceparent: "00-abc-01"}
	for _, tc := range []struct {
		name   string
		id     any
		params any
		exact  bool // byte for byte; otherwise the same JSON value
	}{
		{"tools/call", "gw-1", toolCallParams{Name: "echo", Arguments: json.RawMessage(`{"n":9007199254740993}`)}, true},
		{"tools/call with meta", "gw-2", toolCallParams{Name: "echo", Arguments: json.RawMessage(`{}`), Meta: meta}, true},
		{"empty meta", "gw-2", &toolCallParams{Name: "echo", Arguments: json.RawMessage(`{}`), Meta: &callMeta{}}, true},
		{"pretty arguments", "gw-3", toolCallParams{Name: "echo", Arguments: json.RawMessage("{\n  \"a\": [1, 2]\n}")}, true},
		{"odd strings", `g"w<4>`, toolCallParams{Name: "é\n\"", Arguments: json.RawMessage(`{"s":"<b>"}`)}, false},
		{"raw params", int64(12), json.RawMessage(` {"cursor": "x"} `), true},
		{"no params", int64(-3), nil, true},
		{"nil raw params", "gw-5", json.RawMessage(nil), true},
		{"typed params", "gw-6", mcp.InitializeParams{ProtocolVersion: "2025-11-25"}, true},
		{"nil arguments", "gw-7", toolCallParams{Name: "echo"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(tc.id), Method: "tools/call", Params: tc.params}
			var buf bytes.Buffer
			if err := appendRequest(&buf, &req); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			if bytes.Count(got, []byte("\n")) != 1 || got[len(got)-1] != '\n' {
				t.Fatalf("not one line: %q", got)
			}
			if !sameJSON(t, got, want) || (tc.exact && string(got[:len(got)-1]) != string(want)) {
				t.Fatalf("wrote %s\nwant  %s", got, want)
			}
		})
	}
	for _, args := range []string{`{},"name":"other"`, "{}\n{}", `{"a":`, `nul`} {
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("gw-1"), Method: "tools/call",
			Params: toolCallParams{Name: "echo", Arguments: json.RawMessage(args)}}
		if err := appendRequest(&bytes.Buffer{}, &req); err == nil {
			t.Errorf("arguments %q accepted", args)
		}
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// A write that fails ends the request with the error, and nothing is left
// waiting for it.
func TestLineTransportWriteFails(t *testing.T) {
	p := newPeer(t)
	p.inEnd.Close()
	s := waitSent(t, p.request(context.Background(), "gw-1"))
	if s.err == nil || !strings.Contains(s.err.Error(), "failed to write request") {
		t.Fatalf("got %v", s.err)
	}
	p.tr.mu.Lock()
	defer p.tr.mu.Unlock()
	if len(p.tr.pending) != 0 {
		t.Fatal("the failed request is still waiting")
	}
}

// BenchmarkStdioRoundTrip compares mcp-go's IO transport with
// lineTransport: one tools/call round trip over OS pipes to an echo
// server, through the cap reader the Conn reads with, one caller at a time
// and 16 at once.
func BenchmarkStdioRoundTrip(b *testing.B) {
	transports := []struct {
		name string
		open func(io.Reader, io.WriteCloser) transport.Interface
	}{
		{"mcp-go", func(r io.Reader, w io.WriteCloser) transport.Interface { return transport.NewIO(r, w, nil) }},
		{"lean", func(r io.Reader, w io.WriteCloser) transport.Interface { return newLineTransport(r, w) }},
	}
	for _, tr := range transports {
		b.Run(tr.name+"/serial", func(b *testing.B) { benchRoundTrip(b, tr.open, 1) })
		b.Run(tr.name+"/parallel16", func(b *testing.B) { benchRoundTrip(b, tr.open, 16) })
	}
}

func benchRoundTrip(b *testing.B, open func(io.Reader, io.WriteCloser) transport.Interface, callers int) {
	toServer, fromGateway, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	toGateway, fromServer, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer fromServer.Close()
		echoServer(toServer, fromServer)
	}()
	in := &endNoticer{r: newCapReader(toGateway, 4<<20, frameLine, nil), onEnd: func(error) {}}
	tr := open(in, &watchedWriter{w: fromGateway})
	if err := tr.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	args := json.RawMessage(`{"message":"hello world","count":3,"options":{"upper":false,"repeat":[1,2,3]}}`)
	call := func() {
		id := mcp.NewRequestId("gw-" + strconv.FormatInt(seq.Add(1), 10))
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: "tools/call",
			Params: toolCallParams{Name: "echo", Arguments: args}}
		if resp, err := tr.SendRequest(context.Background(), req); err != nil || resp.Error != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	if callers == 1 {
		for range b.N {
			call()
		}
	} else {
		b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call()
			}
		})
	}
	b.StopTimer()
	// CPU per call (the echo server's included, the same for both): under
	// 16 callers wall time mostly measures how the scheduler batches.
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	tr.Close()
	<-served
	toServer.Close()
	toGateway.Close()
}

// cpuTime is the CPU time this process has used so far, in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// echoServer answers every request line with a short tool result for its
// id, allocating nothing, so the benchmark measures the transport.
func echoServer(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		_, rest, _ := bytes.Cut(line, []byte(`"id":`))
		id, _, _ := bytes.Cut(rest, []byte(","))
		out = append(out[:0], `{"jsonrpc":"2.0","id":`...)
		out = append(out, id...)
		out = append(out, `,"result":{"content":[{"type":"text","text":"echo: hello world, hello world, hello world"}],"isError":false}}`+"\n"...)
		if _, err := w.Write(out); err != nil {
			return
		}
	}
}

// A line longer than maxKeptLine is not kept once the next line is read,
// whether or not that one is long too: one big answer must not pin its
// buffer (up to the message cap, 16 MiB and more) for the connection's life.
func TestLineTransportDropsHugeLineBuffer(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":"gw-1","result":{"text":"` + strings.Repeat("x", maxKeptLine+1) + `"}}` + "\n"
	long := `{"jsonrpc":"2.0","id":"gw-2","result":{"text":"` + strings.Repeat("y", 2*lineReadSize) + `"}}` + "\n"
	short := `{"jsonrpc":"2.0","id":"gw-3","result":{}}` + "\n"
	for _, next := range []string{short, long} {
		tr := newLineTransport(strings.NewReader(huge+next), nopWriteCloser{})
		if line, err := tr.readLine(); err != nil || len(line) != len(huge) {
			t.Fatalf("huge line: %d bytes, %v", len(line), err)
		}
		if line, err := tr.readLine(); err != nil || string(line) != next {
			t.Fatalf("next line: %d bytes, %v", len(line), err)
		}
		if cap(tr.long) > maxKeptLine {
			t.Errorf("after a %d-byte line: %d bytes kept", len(next), cap(tr.long))
		}
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// An upstream that floods requests is served at most maxServing at a time:
// the read loop waits for a slot, and every request is answered in the end.
func TestLineTransportBoundsServedRequests(t *testing.T) {
	p := newPeer(t)
	const requests = maxServing + 36
	var running, most atomic.Int64
	started, release := make(chan struct{}, requests), make(chan struct{})
	p.tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-release // waits for the client, as sampling does
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(`{}`)}, nil
	})
	go func() {
		for i := range requests {
			if _, err := fmt.Fprintf(p.out, `{"jsonrpc":"2.0","id":%d,"method":"sampling/createMessage"}`+"\n", i); err != nil {
				return // the transport closed at cleanup
			}
		}
	}()
	for range maxServing {
		<-started
	}
	close(release)
	for range requests {
		p.next()
	}
	if m := most.Load(); m > maxServing {
		t.Fatalf("%d requests served at once, want at most %d", m, maxServing)
	}
}

// A write still blocked at its caller's deadline (the child stopped reading
// its input) gives up, and closes the transport: part of the line may be in
// the pipe, so nothing more can follow it.
func TestLineTransportStuckWriteGivesUpAtTheDeadline(t *testing.T) {
	_, pw, out := pipeOutput(t)
	tr, _ := startOver(t, out, func(tr *lineTransport) {
		tr.stuckAfter = 100 * time.Millisecond // the request waits 300 ms with nothing taken
	})
	if !tr.timedWrites() {
		t.Fatal("a pipe's write end cannot time out a write")
	}
	// Fill the pipe first, so that a small request blocks: a large one
	// took long enough to build under -race on a busy machine that its
	// deadline passed before its write began (then it is not sent at all).
	fillPipe(t, pw)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("gw-1"), Method: "tools/call",
		Params: toolCallParams{Name: "echo", Arguments: json.RawMessage(`{}`)}}
	if _, err := tr.SendRequest(ctx, req); !errors.Is(err, errWriteStuck) {
		t.Fatalf("err %v, want errWriteStuck", err)
	}
	req.ID = mcp.NewRequestId("gw-2")
	req.Params = toolCallParams{Name: "echo", Arguments: json.RawMessage(`{}`)}
	if _, err := tr.SendRequest(context.Background(), req); !errors.Is(err, transport.ErrTransportClosed) || !errors.Is(err, errNotStarted) {
		t.Fatalf("after the stuck write: %v, want closed and not started", err)
	}
}

// decodeAnswerShortcut: where decodeAnswerFast takes a line, json.Unmarshal
// accepts it and gives the same message.
var decodeAnswerShortcut = testkit.Shortcut[wireMessage]{
	Decode: func(line []byte) (wireMessage, bool) {
		var m wireMessage
		taken := decodeAnswerFast(line, &m)
		return m, taken
	},
	Check: func(t *testing.T, line []byte, fast wireMessage) {
		var want wireMessage
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("decodeAnswerFast took %q, which json.Unmarshal refuses: %v", line, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("decodeAnswerFast(%q) = %+v, json.Unmarshal %+v", line, fast, want)
		}
	}}

func TestDecodeAnswerFastAgrees(t *testing.T) { decodeAnswerShortcut.Table(t, testkit.AnswerSeeds) }

func FuzzDecodeAnswerFast(f *testing.F) { decodeAnswerShortcut.Fuzz(f, testkit.AnswerSeeds) }

// BenchmarkDecodeAnswer is the usual answer line's decoding.
func BenchmarkDecodeAnswer(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":"gw-1","result":{"content":[{"type":"text","text":"{\"found\":true}"}],"structuredContent":{"found":true}}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		var m wireMessage
		if !decodeAnswerFast(line, &m) {
			b.Fatal("refused")
		}
	}
}

// wantGarbage waits for a request failed because the reply was garbage:
// at once (well before the request's own deadline), as a CallError that
// says it was sent (breaker.Classify: a broken transport, upstream_error).
func wantGarbage(t *testing.T, done <-chan sent, within time.Duration) *CallError {
	t.Helper()
	var s sent
	select {
	case s = <-done:
	case <-time.After(within):
		t.Fatalf("the request still waits %v after the garbage", within)
	}
	var ce *CallError
	if !errors.As(s.err, &ce) || ce.Where != Sent || !errors.Is(s.err, errGarbage) {
		t.Fatalf("got %+v, %v; want a CallError{Where: Sent} for garbage", s.resp, s.err)
	}
	return ce
}

// garbageDeadline is the request's deadline in the garbage tests, far
// beyond atOnce (how long wantGarbage waits): only failing at once passes.
const (
	garbageDeadline = time.Minute
	atOnce          = 5 * time.Second
)

func garbageCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), garbageDeadline)
	t.Cleanup(cancel)
	return ctx
}

// An answer under an id no request has, with one request waiting, fails
// that request at once; the transport stays usable.
func TestLineTransportWrongIDFailsTheWaitingRequest(t *testing.T) {
	for _, wrong := range []string{
		`{"jsonrpc":"2.0","id":"gw-1-wrong","result":{"ok":1}}`,
		`{"jsonrpc":"2.0","id":1000004,"result":{"ok":1}}`,
		`{"jsonrpc":"2.0","result":{"ok":1}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	} {
		t.Run(wrong, func(t *testing.T) {
			p := newPeer(t)
			done := p.request(garbageCtx(t), "gw-1")
			p.next()
			p.send(wrong)
			if ce := wantGarbage(t, done, atOnce); !strings.Contains(ce.Error(), "garbage") {
				t.Fatalf("error %q does not say the reply was garbage", ce)
			}
			next := p.request(garbageCtx(t), "gw-2")
			p.next()
			p.send(`{"jsonrpc":"2.0","id":"gw-2","result":{"ok":2}}`)
			if s := waitSent(t, next); s.err != nil || string(s.resp.Result) != `{"ok":2}` {
				t.Fatalf("after the garbage: %+v, %v", s.resp, s.err)
			}
		})
	}
}

// An answer split by a raw newline (neither part is JSON) fails the
// request waiting at once; the second part fails nothing more, and the
// transport stays usable.
func TestLineTransportSplitLineFailsTheWaitingRequest(t *testing.T) {
	for _, split := range [][2]string{
		{`{"jsonrpc":"2.0","id":"gw-1","result":{"content":[{"type":"text","text":"an answer`, ` split"}]}}`},
		{`{"jsonrpc":"2.0","id":"gw-1","result":`, `{"content":[{"type":"text","text":"split"}]}}`},
	} {
		t.Run(split[1], func(t *testing.T) {
			p := newPeer(t)
			done := p.request(garbageCtx(t), "gw-1")
			p.next()
			p.send(split[0])
			wantGarbage(t, done, atOnce)
			// A request made before the rest of the line arrives is not
			// taken for its victim.
			next := p.request(garbageCtx(t), "gw-2")
			p.next()
			p.send(split[1], `{"jsonrpc":"2.0","id":"gw-2","result":{"ok":2}}`)
			if s := waitSent(t, next); s.err != nil || string(s.resp.Result) != `{"ok":2}` {
				t.Fatalf("after the split line: %+v, %v", s.resp, s.err)
			}
		})
	}
}

// Garbage that names no request while two wait cannot be attributed: both
// fail at once (see garbled for why). Their late answers are dropped, and
// a valid answer after the garbage is delivered.
func TestLineTransportGarbageWithTwoWaitingFailsBoth(t *testing.T) {
	for _, garbage := range []string{
		`{"jsonrpc":"2.0","id":"gw-9","result":{"ok":9}}`,
		`{"jsonrpc":"2.0","id":"gw-1","result":{"content":[{"type":"text","text":"an answer`,
	} {
		t.Run(garbage, func(t *testing.T) {
			p := newPeer(t)
			first := p.request(garbageCtx(t), "gw-1")
			p.next()
			second := p.request(garbageCtx(t), "gw-2")
			p.next()
			p.send(garbage)
			for _, done := range []<-chan sent{first, second} {
				if ce := wantGarbage(t, done, atOnce); !strings.Contains(ce.Error(), "2 requests waited") {
					t.Fatalf("error %q does not say why it could not be attributed", ce)
				}
			}
			third := p.request(garbageCtx(t), "gw-3")
			p.next()
			p.send(`{"jsonrpc":"2.0","id":"gw-2","result":{"late":2}}`, `{"jsonrpc":"2.0","id":"gw-1","result":{"late":1}}`,
				`{"jsonrpc":"2.0","id":"gw-3","result":{"ok":3}}`)
			if s := waitSent(t, third); s.err != nil || string(s.resp.Result) != `{"ok":3}` {
				t.Fatalf("after the garbage: %+v, %v", s.resp, s.err)
			}
		})
	}
}

// An invalid answer that names its request fails that request only: the
// other one waiting is answered as usual.
func TestLineTransportInvalidAnswerFailsOnlyItsRequest(t *testing.T) {
	for _, invalid := range []string{
		`{"jsonrpc":"2.0","id":"gw-1","error":17}`,
		`{"jsonrpc":"2.0","id":"gw-1"}`,
	} {
		t.Run(invalid, func(t *testing.T) {
			p := newPeer(t)
			first := p.request(garbageCtx(t), "gw-1")
			p.next()
			second := p.request(garbageCtx(t), "gw-2")
			p.next()
			p.send(invalid)
			wantGarbage(t, first, atOnce)
			select {
			case s := <-second:
				t.Fatalf("the other request ended too: %+v, %v", s.resp, s.err)
			default:
			}
			p.send(`{"jsonrpc":"2.0","id":"gw-2","result":{"ok":2}}`)
			if s := waitSent(t, second); s.err != nil || string(s.resp.Result) != `{"ok":2}` {
				t.Fatalf("the other request: %+v, %v", s.resp, s.err)
			}
		})
	}
}

// The late answer to a request given up on (its deadline passed) is not
// garbage: it fails no request waiting.
func TestLineTransportLateAnswerIsNotGarbage(t *testing.T) {
	p := newPeer(t)
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := p.request(ctx, "gw-1")
	p.next()
	cancel()
	if s := waitSent(t, abandoned); !errors.Is(s.err, context.Canceled) {
		t.Fatalf("cancelled request: %+v, %v", s.resp, s.err)
	}
	done := p.request(garbageCtx(t), "gw-2")
	p.next()
	p.send(`{"jsonrpc":"2.0","id":"gw-1","result":{"late":1}}`, `{"jsonrpc":"2.0","id":"gw-2","result":{"ok":2}}`)
	if s := waitSent(t, done); s.err != nil || string(s.resp.Result) != `{"ok":2}` {
		t.Fatalf("after a late answer: %+v, %v", s.resp, s.err)
	}
}
