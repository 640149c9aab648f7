package testupstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// rawSession drives a stdio upstream line by line.
type rawSession struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Reader
	pipe   interface{ SetReadDeadline(time.Time) error } // the child's stdout
	cmd    *exec.Cmd
	stderr *lockedBuffer
	recent []string // the last lines read, for a failure's message

	waitOnce sync.Once
	waitErr  error
}

// wait waits for the child once, whoever asks first.
func (s *rawSession) wait() error {
	s.waitOnce.Do(func() { s.waitErr = s.cmd.Wait() })
	return s.waitErr
}

// rawReadLimit bounds the wait for one line from the child: an upstream
// that stops answering fails the test at once, with its goroutines'
// stacks, instead of at the test binary's timeout with the test's only.
const rawReadLimit = 30 * time.Second

// lockedBuffer is the child's stderr, written by exec's copier.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (s *rawSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *rawSession) recv() string {
	s.t.Helper()
	if s.pipe != nil {
		_ = s.pipe.SetReadDeadline(time.Now().Add(rawReadLimit))
	}
	line, err := s.out.ReadString('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.t.Fatalf("the upstream wrote nothing for %v (partial line %q); the last lines it wrote:\n%s\nits goroutines:\n%s",
			rawReadLimit, line, strings.Join(s.recent, "\n"), s.childStacks())
	}
	if err != nil {
		s.t.Fatalf("read: %v (%q)", err, line)
	}
	line = strings.TrimSuffix(line, "\n")
	s.recent = append(s.recent, line)
	if len(s.recent) > 20 {
		s.recent = s.recent[1:]
	}
	return line
}

// childStacks makes the child dump its goroutines (SIGQUIT) and returns
// its stderr once it exited.
func (s *rawSession) childStacks() string {
	if s.cmd == nil || s.cmd.Process == nil {
		return "(unknown)"
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	done := make(chan struct{})
	go func() { _ = s.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	return s.stderr.String()
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         float64         `json:"total"`
	} `json:"params"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

func (m message) text() string {
	if m.Result == nil || len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// until reads messages until one answers id, returning it and what came before.
func (s *rawSession) until(id string) (message, []message) {
	s.t.Helper()
	var before []message
	for {
		line := s.recv()
		var m message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			s.t.Fatalf("not JSON: %q", line)
		}
		if string(m.ID) == id && m.Method == "" {
			return m, before
		}
		before = append(before, m)
	}
}

func (s *rawSession) call(id, tool, args string) {
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
}

// startRaw starts the upstream as a child process (not MainIO: mcp-go's stdio
// session, with its notification channel, is process-wide, and a previous
// in-process run's writer may still take a notification) and initializes it.
func startRaw(t *testing.T, args ...string) *rawSession {
	t.Helper()
	cmd := child(t, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &rawSession{t: t, in: in, out: bufio.NewReaderSize(out, 1<<16), cmd: cmd, stderr: stderr}
	if p, ok := out.(interface{ SetReadDeadline(time.Time) error }); ok {
		s.pipe = p
	}
	t.Cleanup(func() {
		_ = in.Close() // EOF ends the upstream
		if s.pipe != nil {
			_ = s.pipe.SetReadDeadline(time.Time{})
		}
		_, _ = io.Copy(io.Discard, s.out)
		err := s.wait()
		if t.Failed() {
			return // it may have been made to dump its stacks
		}
		if code := exitCode(t, err); code != 0 {
			t.Errorf("exit code %d", code)
		}
	})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func TestProtocolAbuseModesOverStdio(t *testing.T) {
	s := startRaw(t)

	s.call("7", "wrong_id", `{}`)
	if line := s.recv(); !strings.Contains(line, `"id":1000010,`) || !strings.Contains(line, "wrong id") {
		t.Fatalf("wrong_id (number): %s", line)
	}
	s.call(`"w-1"`, "wrong_id", `{}`)
	if line := s.recv(); !strings.Contains(line, `"id":"w-1-wrong"`) {
		t.Fatalf("wrong_id (string): %s", line)
	}

	s.call(`"s-1"`, "split_line", `{}`)
	first, second := s.recv(), s.recv()
	if !strings.HasPrefix(first, `{"jsonrpc":"2.0","id":"s-1","result":`) || !strings.HasSuffix(first, SplitAnswer[:SplitAt]) ||
		!strings.HasPrefix(second, SplitAnswer[SplitAt:]+`"}]`) {
		t.Fatalf("split_line: %q then %q", first, second)
	}

	s.call("8", "stdout_noise", `{}`)
	if line := s.recv(); line != NoiseLine {
		t.Fatalf("noise: %q", line)
	}
	if m, _ := s.until("8"); m.text() != NoiseAnswer {
		t.Fatalf("after noise: %+v", m)
	}

	s.call("9", "drip", `{"bytes":500,"chunk":7,"ms_per_chunk":1}`)
	if m, _ := s.until("9"); len(m.text()) != 500 || strings.Trim(m.text(), "x") != "" {
		t.Fatalf("drip: %q", m.text())
	}

	// progress notifications carry the request's token; without one there
	// are none. mcp-go's stdio server writes notifications from a goroutine
	// of their own: they may come after the answer (so collect them over
	// the next calls too).
	s.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":"tok-10"}}}`)
	m, notes := s.until("10")
	if m.text() != "done 3 steps" {
		t.Fatalf("progress: %+v", m)
	}
	s.call("11", "progress", `{"steps":3}`)
	_, more := s.until("11")
	notes = append(notes, more...)
	// Late notifications come before some later answer: keep calling echo
	// (a round trip each, no sleeps) until they are in, within a bound, and
	// one more to see that no stray one follows.
	for i := 0; len(notes) < 3 && i < 200; i++ {
		id := fmt.Sprintf(`"late-%d"`, i) // a JSON string: call and until take the raw id
		s.call(id, "echo", `{}`)
		_, late := s.until(id)
		notes = append(notes, late...)
	}
	s.call("12", "echo", `{}`)
	_, more2 := s.until("12")
	notes = append(notes, more2...)
	if len(notes) != 3 {
		t.Errorf("%d notifications, want 3 (with the token) and none without", len(notes))
	}
	for i, n := range notes {
		if n.Method != "notifications/progress" || string(n.Params.ProgressToken) != `"tok-10"` || n.Params.Progress != float64(i+1) || n.Params.Total != 3 {
			t.Errorf("notification %d: %+v", i, n)
		}
	}

	// ordered: the notifications come before the answer, every one.
	s.send(`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"ordered":true},"_meta":{"progressToken":7}}}`)
	m, notes = s.until("13")
	if m.text() != "done 3 steps" || len(notes) != 3 {
		t.Fatalf("ordered progress: %+v after %d notifications, want 3", m, len(notes))
	}
	for i, n := range notes {
		if n.Method != "notifications/progress" || string(n.Params.ProgressToken) != `7` || n.Params.Progress != float64(i+1) || n.Params.Total != 3 {
			t.Errorf("ordered notification %d: %+v", i, n)
		}
	}

	// flip_tools adds and removes flipped and announces it.
	s.call("15", "flip_tools", `{}`)
	m, before := s.until("15")
	if m.text() != "added flipped" {
		t.Fatalf("flip: %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":13,"method":"tools/list"}`)
	var line string
	var notes13 []string
	for line = s.recv(); !strings.Contains(line, `"id":13`); line = s.recv() {
		notes13 = append(notes13, line)
	}
	if !strings.Contains(line, `"name":"flipped"`) {
		t.Fatalf("after flip: %.300s", line)
	}
	s.call("14", "flip_tools", `{}`)
	m, after := s.until("14")
	if m.text() != "removed flipped" {
		t.Fatalf("flip back: %+v", m)
	}
	// The announcement comes from the notification writer: before or after
	// the answers around it.
	announced := strings.Count(strings.Join(notes13, "\n"), "notifications/tools/list_changed")
	for _, n := range append(before, after...) {
		if n.Method == "notifications/tools/list_changed" {
			announced++
		}
	}
	if announced == 0 {
		t.Error("no notifications/tools/list_changed")
	}

	// ignore_cancel keeps running after notifications/cancelled, which is
	// recorded. (mcp-go then sends no answer for the cancelled request.)
	s.call("20", "ignore_cancel", `{"ms":300}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20,"reason":"test"}}`)
	s.call("21", "cancelled_requests", `{"wait_for":1,"ms":10000}`)
	m, _ = s.until("21")
	var got struct {
		Cancelled []string `json:"cancelled"`
	}
	if err := json.Unmarshal([]byte(m.text()), &got); err != nil || len(got.Cancelled) != 1 || got.Cancelled[0] != "20" {
		t.Errorf("cancelled_requests: %q", m.text())
	}

}

// endless writes one line that never ends, until the reader goes away.
func TestEndlessOverStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := MainIO(nil, inR, outW, io.Discard)
		_ = outW.Close()
		code <- c
	}()
	s := &rawSession{t: t, in: inW, out: bufio.NewReader(outR)}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.call("2", "endless", `{}`)
	head := make([]byte, 100)
	if _, err := io.ReadFull(s.out, head); err != nil || !bytes.HasPrefix(head, []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"xx`)) {
		t.Fatalf("head %q: %v", head, err)
	}
	n, err := io.CopyN(io.Discard, s.out, 8<<20)
	if err != nil || n != 8<<20 {
		t.Fatalf("read %d: %v", n, err)
	}
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		t.Fatal("the line ended")
	}
	_ = outR.Close() // the writer fails; the upstream ends on stdin EOF
	_ = inW.Close()
	waitCode(t, code)
}

func TestCrashAfterAndFailOnce(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	var stderr bytes.Buffer
	cmd := child(t, "-fail-once", marker)
	cmd.Stderr = &stderr
	if code := exitCode(t, cmd.Run()); code != 3 || !strings.Contains(stderr.String(), "first run") {
		t.Fatalf("first run: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("marker: %v", err)
	}

	cmd, c, stderrBuf := stdioChild(t, "-fail-once", marker, "-crash-after", "2")
	initialize(t, c)
	for i := range 2 {
		if res := mustCall(t, c, "echo", fmt.Sprintf(`{"n":%d}`, i)); onlyText(t, res) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("call %d: %+v", i, res)
		}
	}
	done := make(chan int, 1)
	go func() { done <- exitCode(t, cmd.Wait()) }()
	select {
	case code := <-done:
		if code != CrashAfterCode {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after 2 answers")
	}
	_ = c.Close()
	if !strings.Contains(stderrBuf.String(), "answered 2 calls") {
		t.Errorf("stderr %q", stderrBuf.String())
	}
}

// Over HTTP the modes behave alike; an upstream's POST body is where the
// notifications/cancelled are recorded.
func TestModesOverHTTP(t *testing.T) {
	url, stop, err := StartHTTP(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := httpClient(t, url, false)
	defer c.Close()
	if res := mustCall(t, c, "drip", `{"bytes":300,"chunk":50,"ms_per_chunk":1}`); len(onlyText(t, res)) != 300 {
		t.Fatalf("drip: %q", onlyText(t, res))
	}
	if res := mustCall(t, c, "flip_tools", `{}`); onlyText(t, res) != "added flipped" {
		t.Fatal(onlyText(t, res))
	}
	all, err := c.ListTools(testCtx(t), mcp.ListToolsRequest{})
	if err != nil || !slices.Contains(toolNames(all.Tools), FlippedTool) {
		t.Fatalf("after flip: %v", err)
	}
	// mcp-go's Streamable HTTP client takes a POST's answer whatever id it
	// carries (pinned: a gateway must check the id itself).
	if res, err := callTool(testCtx(t), c, "wrong_id", `{}`); err != nil || onlyText(t, res) != "an answer under the wrong id" {
		t.Fatalf("wrong_id over HTTP: %v", err)
	}
}
