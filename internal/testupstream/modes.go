package testupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Markers of the answers the output wrapper writes itself (see package doc). DripMarker is followed
// by " <bytes> <chunk> <ms>".
const (
	WrongIDMarker = "__TESTUPSTREAM_WRONG_ID__"
	NoiseMarker   = "__TESTUPSTREAM_NOISE__"
	DripMarker    = "__TESTUPSTREAM_DRIP__"
	EndlessMarker = "__TESTUPSTREAM_ENDLESS__"
	SplitMarker   = "__TESTUPSTREAM_SPLIT__"
	// OrderedProgressMarker, followed by " <steps> <token JSON>", is replaced by steps
	// notifications/progress and the answer, written at once in that order (progress with
	// ordered: true). mcp-go's servers write a tool's notifications from another goroutine than
	// its answer, so its own progress may follow the answer; a client of a server that writes
	// them in order (as the MCP conformance suite's reference server does) must get them all
	// before the answer.
	OrderedProgressMarker = "__TESTUPSTREAM_ORDERED_PROGRESS__"
)

// SplitAnswer is the text of split_line's answer, which a raw newline splits after SplitAt bytes.
const (
	SplitAnswer = "an answer split by a raw newline"
	SplitAt     = len("an answer")
)

// NoiseLine is what stdout_noise writes before its answer.
const NoiseLine = "this line is not JSON-RPC"

// NoiseAnswer is the text of stdout_noise's answer, written after the noise.
const NoiseAnswer = "answered after noise"

// FlippedTool is the tool flip_tools adds and removes.
const FlippedTool = "flipped"

// CrashAfterCode is the exit code of a process whose -crash-after count was reached.
const CrashAfterCode = 4

// MaxDripBytes bounds drip's answer.
const MaxDripBytes = 16 << 20

// runtimeState is what the tools of one upstream share with the I/O wrappers around it: the
// cancellations seen on the input, and the -crash-after countdown seen on the output.
type runtimeState struct {
	exit func(code int)

	mu        sync.Mutex
	cancelled []string      // request ids named by notifications/cancelled, as JSON
	ignored   int           // ignore_cancel calls whose context ended while they kept running
	changed   chan struct{} // closed and replaced whenever cancelled or ignored change

	crashAfter int          // exit after answering this many calls (0: never)
	answered   atomic.Int64 // tool calls answered so far
	exitID     atomic.Value // string: JSON id of the answer after which to exit
	exiting    sync.Once
}

func newRuntime(exit func(int), crashAfter int) *runtimeState {
	rt := &runtimeState{exit: exit, crashAfter: crashAfter, changed: make(chan struct{})}
	rt.exitID.Store("")
	return rt
}

func (rt *runtimeState) noteChange() {
	close(rt.changed)
	rt.changed = make(chan struct{})
}

// recordCancelled notes a notifications/cancelled for id (raw JSON).
func (rt *runtimeState) recordCancelled(id json.RawMessage) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.cancelled = append(rt.cancelled, string(compactJSON(id)))
	rt.noteChange()
}

func (rt *runtimeState) recordIgnored() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.ignored++
	rt.noteChange()
}

// waitCancelled waits until at least n cancellations were recorded or ctx ends, and returns what
// was recorded.
func (rt *runtimeState) waitCancelled(ctx context.Context, n int) ([]string, int) {
	for {
		rt.mu.Lock()
		ids, ignored, changed := append([]string{}, rt.cancelled...), rt.ignored, rt.changed
		rt.mu.Unlock()
		if len(ids) >= n {
			return ids, ignored
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ids, ignored
		}
	}
}

// noteInput records the notifications/cancelled in one line of input (a JSON-RPC message).
func (rt *runtimeState) noteInput(line []byte) {
	if !bytes.Contains(line, []byte("notifications/cancelled")) {
		return
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) == nil && msg.Method == string(mcp.MethodNotificationCancelled) && len(msg.Params.RequestID) > 0 {
		rt.recordCancelled(msg.Params.RequestID)
	}
}

// afterCallTool counts answered calls; when the -crash-after count is reached it arms the exit for
// the answer to that call's id.
func (rt *runtimeState) afterCallTool(_ context.Context, id any, _ *mcp.CallToolRequest, _ any) {
	if rt.crashAfter <= 0 {
		return
	}
	if rt.answered.Add(1) == int64(rt.crashAfter) {
		b, err := json.Marshal(id)
		if err == nil {
			rt.exitID.Store(string(b))
		}
	}
}

// afterLine is called by the output wrapper after it wrote a line: once the armed answer is out,
// the process exits.
func (rt *runtimeState) afterLine(line []byte, w io.Writer) {
	want, _ := rt.exitID.Load().(string)
	if want == "" || !bytes.Contains(line, []byte(want)) {
		return
	}
	body := line
	if rest, ok := bytes.CutPrefix(body, []byte("data:")); ok {
		body = rest
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &msg) != nil || msg.Method != "" || string(compactJSON(msg.ID)) != want {
		return
	}
	rt.exiting.Do(func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		rt.exit(CrashAfterCode)
	})
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// inputRecorder passes input through and hands each complete line to noteInput.
type inputRecorder struct {
	r    io.Reader
	rt   *runtimeState
	line []byte
}

// maxRecordedLine bounds the bytes held to recognise a notification; longer lines are requests.
const maxRecordedLine = 64 << 10

func (in *inputRecorder) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if len(in.line) < maxRecordedLine {
				in.line = append(in.line, chunk...)
			}
			break
		}
		if len(in.line)+i < maxRecordedLine {
			in.rt.noteInput(append(in.line, chunk[:i]...))
		}
		in.line = in.line[:0]
		chunk = chunk[i+1:]
	}
	return n, err
}

// recordingHandler notes the notifications/cancelled POSTed to an HTTP upstream.
func recordingHandler(h http.Handler, rt *runtimeState) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedLine+1))
			if err == nil && len(body) <= maxRecordedLine {
				rt.noteInput(body)
			}
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		}
		h.ServeHTTP(w, r)
	})
}

// modeTools are the tools for supervision, list-change, progress and protocol-abuse tests.
func modeTools(srv *server.MCPServer, rt *runtimeState) []server.ServerTool {
	tool := func(name, desc, schema string) mcp.Tool {
		return mcp.Tool{Name: name, Description: desc, RawInputSchema: json.RawMessage(schema), Annotations: hints(false, false, false, false)}
	}
	noArgs := `{"type":"object","properties":{},"additionalProperties":false}`
	var flipMu sync.Mutex
	flipped := false
	return []server.ServerTool{
		{Tool: tool("flip_tools", "Adds the tool flipped (with a hostile input schema when hostile is true), or removes it; "+
			"either way the server sends notifications/tools/list_changed.",
			`{"type":"object","properties":{"hostile":{"type":"boolean"}},"additionalProperties":false}`),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args struct {
					Hostile bool `json:"hostile"`
				}
				_ = json.Unmarshal(rawArgs(req), &args)
				flipMu.Lock()
				defer flipMu.Unlock()
				if flipped {
					srv.DeleteTools(FlippedTool)
					flipped = false
					return mcp.NewToolResultText("removed " + FlippedTool), nil
				}
				schema := noArgs
				if args.Hostile {
					schema = RemoteRefSchema
				}
				srv.AddTool(tool(FlippedTool, "Exists between two flip_tools calls.", schema),
					func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return mcp.NewToolResultText(FlippedTool + " was called"), nil
					})
				flipped = true
				return mcp.NewToolResultText("added " + FlippedTool), nil
			}},
		{Tool: tool("progress", "Sends steps progress notifications (ms apart) with the call's progressToken, then answers.",
			`{"type":"object","properties":{"steps":{"type":"integer","minimum":0,"maximum":10000},"ms":{"type":"integer","minimum":0},"ordered":{"type":"boolean"},"message":{"type":"string"}},"required":["steps"],"additionalProperties":false}`),
			Handler: progressTool},
		{Tool: tool("wrong_id", "Answers under a JSON-RPC id that is not the request's.", noArgs), Handler: marker(WrongIDMarker)},
		{Tool: tool("stdout_noise", "Writes a line that is not JSON to its output, then answers.", noArgs), Handler: marker(NoiseMarker)},
		{Tool: tool("split_line", "Answers with a raw newline inside its answer line.", noArgs), Handler: marker(SplitMarker)},
		{Tool: tool("drip", "Answers with a text of bytes bytes, written chunk bytes at a time, ms_per_chunk apart.",
			`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0,"maximum":`+strconv.Itoa(MaxDripBytes)+`},"chunk":{"type":"integer","minimum":1},"ms_per_chunk":{"type":"integer","minimum":0}},"required":["bytes"],"additionalProperties":false}`),
			Handler: drip},
		{Tool: tool("ignore_cancel", "Keeps running for ms even after the call is cancelled, then answers.",
			`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"],"additionalProperties":false}`),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ms, err := intArg(req, "ms")
				if err != nil || ms < 0 {
					return mcp.NewToolResultError("ignore_cancel: ms must be an integer >= 0"), nil
				}
				t := time.NewTimer(time.Duration(ms) * time.Millisecond)
				defer t.Stop()
				select {
				case <-ctx.Done():
					rt.recordIgnored()
					<-t.C
					return mcp.NewToolResultText("cancelled, ignored it"), nil
				case <-t.C:
					return mcp.NewToolResultText("finished"), nil
				}
			}},
		{Tool: tool("cancelled_requests", "Lists the request ids named by notifications/cancelled so far (as JSON), waiting up to ms "+
			"for at least wait_for of them; ignored counts ignore_cancel calls that kept running after cancellation.",
			`{"type":"object","properties":{"wait_for":{"type":"integer","minimum":0},"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				n, _ := intArg(req, "wait_for")
				ms, _ := intArg(req, "ms")
				wctx, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
				defer cancel()
				ids, ignored := rt.waitCancelled(wctx, int(n))
				b, _ := json.Marshal(map[string]any{"cancelled": ids, "ignored": ignored})
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, RawStructuredContent: b}, nil
			}},
		{Tool: tool("endless", "Answers with a text that never ends (over stdio: a line without end).", noArgs), Handler: marker(EndlessMarker)},
	}
}

func progressTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps, err := intArg(req, "steps")
	if err != nil || steps < 0 || steps > 10000 {
		return mcp.NewToolResultError("progress: steps must be an integer in [0, 10000]"), nil
	}
	ms, _ := intArg(req, "ms")
	if ordered, _ := req.GetArguments()["ordered"].(bool); ordered && ms == 0 && req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		// The output wrapper writes the notifications and the answer, in that
		// order, back to back (see orderedProgress).
		token, err := json.Marshal(req.Params.Meta.ProgressToken)
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultText(fmt.Sprintf("%s %d %s", OrderedProgressMarker, steps, token)), nil
	}
	for i := int64(1); i <= steps; i++ {
		if ms > 0 {
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		message := fmt.Sprintf("step %d of %d", i, steps)
		if m, _ := req.GetArguments()["message"].(string); m != "" {
			message = m
		}
		progress(ctx, req, float64(i), float64(steps), message)
	}
	return mcp.NewToolResultText(fmt.Sprintf("done %d steps", steps)), nil
}

func drip(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := intArg(req, "bytes")
	if err != nil || n < 0 || n > MaxDripBytes {
		return mcp.NewToolResultError(fmt.Sprintf("drip: bytes must be an integer in [0, %d]", MaxDripBytes)), nil
	}
	chunk, err := intArg(req, "chunk")
	if err != nil || chunk < 1 {
		chunk = 16
	}
	ms, err := intArg(req, "ms_per_chunk")
	if err != nil || ms < 0 {
		ms = 10
	}
	return mcp.NewToolResultText(fmt.Sprintf("%s %d %d %d", DripMarker, n, chunk, ms)), nil
}

// streamer writes an answer that cannot be built in one piece: drip and endless.
type streamer struct {
	prefix []byte
	id     json.RawMessage
	kind   string
	args   []int64
}

// parseStreamer recognises a drip or endless marker answer (see rewriteLine for the matching).
func parseStreamer(prefix []byte, id json.RawMessage, text string) *streamer {
	switch {
	case text == EndlessMarker:
		return &streamer{prefix: prefix, id: id, kind: "endless"}
	case bytes.HasPrefix([]byte(text), []byte(DripMarker+" ")):
		var b, c, ms int64
		if _, err := fmt.Sscanf(text[len(DripMarker)+1:], "%d %d %d", &b, &c, &ms); err != nil || b < 0 || c < 1 || ms < 0 {
			return nil
		}
		return &streamer{prefix: prefix, id: id, kind: "drip", args: []int64{b, c, ms}}
	}
	return nil
}

// write sends the answer to w, ending it with end (the original line ending).
func (s *streamer) write(w io.Writer, end []byte) error {
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	head := append(append(append([]byte{}, s.prefix...), `{"jsonrpc":"2.0","id":`...), s.id...)
	head = append(head, `,"result":{"content":[{"type":"text","text":"`...)
	if s.kind == "endless" {
		if _, err := w.Write(head); err != nil {
			return err
		}
		fill := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(fill); err != nil {
				return err
			}
			flush()
		}
	}
	n, chunk, ms := s.args[0], s.args[1], s.args[2]
	msg := append(head, bytes.Repeat([]byte("x"), int(n))...)
	msg = append(msg, `"}]}}`...)
	msg = append(msg, end...)
	for len(msg) > 0 {
		k := min(int(chunk), len(msg))
		if _, err := w.Write(msg[:k]); err != nil {
			return err
		}
		flush()
		msg = msg[k:]
		if len(msg) > 0 && ms > 0 {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	}
	return nil
}
