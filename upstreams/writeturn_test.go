package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

// heldOutput is a child's stdin that can time out a write: each Write
// reports itself on started and waits for a value on hold.
type heldOutput struct {
	started chan []byte
	hold    chan struct{}
}

func (h *heldOutput) Write(p []byte) (int, error) {
	h.started <- bytes.Clone(p)
	<-h.hold
	return len(p), nil
}

func (h *heldOutput) SetWriteDeadline(time.Time) error { return nil }
func (h *heldOutput) canTimeOut() bool                 { return true }
func (h *heldOutput) Close() error                     { return nil }

// A request waiting for its turn to be written when the transport closes
// writes nothing (a write before it may have ended in a partial line) and
// fails as not sent, so it may be tried again; the request whose write was
// under way was sent, and fails as closed.
func TestRequestWaitingToBeWrittenWhenClosedIsNotSent(t *testing.T) {
	before := goleak.IgnoreCurrent()
	out := &heldOutput{started: make(chan []byte, 2), hold: make(chan struct{}, 2)}
	inR, inW := io.Pipe()
	tr := newLineTransport(inR, out)
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		inW.Close()
		goleak.VerifyNone(t, before)
	}()
	send := func(id string, errs chan<- error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: []byte(`{}`)}})
		errs <- err
	}
	first, second := make(chan error, 1), make(chan error, 1)
	go send("gw-1", first)
	<-out.started
	go send("gw-2", second)
	for give := time.Now().Add(generous); pendingCount(tr) < 2; runtime.Gosched() {
		if time.Now().After(give) {
			t.Fatalf("%d requests registered, want 2", pendingCount(tr))
		}
	}
	tr.Close()
	out.hold <- struct{}{} // gw-1's write ends; it was sent, and the close ended its wait
	if err := <-first; !errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, errNotStarted) {
		t.Fatalf("gw-1: %v, want closed after it was sent", err)
	}
	select {
	case err := <-second:
		if !errors.Is(err, errNotStarted) {
			t.Fatalf("gw-2: %v, want not sent", err)
		}
	case <-time.After(generous):
		t.Fatal("gw-2 did not return")
	}
	if n := len(out.started); n != 0 {
		t.Fatalf("%d more writes after the close, want none", n)
	}
}

// pendingCount is how many requests wait for an answer.
func pendingCount(tr *lineTransport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.pending)
}

// deadlinelessOutput is a child's stdin whose write deadline cannot be
// set (a closed pipe, or a file the runtime does not poll).
type deadlinelessOutput struct{ writes atomic.Int32 }

func (o *deadlinelessOutput) Write(p []byte) (int, error) { o.writes.Add(1); return len(p), nil }
func (o *deadlinelessOutput) SetWriteDeadline(time.Time) error {
	return os.ErrNoDeadline
}
func (o *deadlinelessOutput) canTimeOut() bool { return true }
func (o *deadlinelessOutput) Close() error     { return nil }

// A write whose deadline cannot be set is not made: the request fails as
// not sent (it may be tried again), not as sent and lost.
func TestRequestWhoseWriteCannotBeBoundedIsNotSent(t *testing.T) {
	out := &deadlinelessOutput{}
	tr, _ := startOver(t, out, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("gw-1"),
		Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: []byte(`{}`)}})
	var ce *CallError
	if !errors.As(err, &ce) || ce.Where != NotSent || !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("err %v, want a CallError NotSent naming the deadline", err)
	}
	if n := out.writes.Load(); n != 0 {
		t.Fatalf("%d writes, want none", n)
	}
	if n := pendingCount(tr); n != 0 {
		t.Fatalf("%d requests still wait for an answer, want none", n)
	}
}

// A request whose deadline passes while it waits for its turn to be
// written (a slow write before it) leaves at its deadline, is not written,
// fails as not sent, and does not make the child look stuck: the write
// before it finishes, and the transport carries on.
func TestRequestWhoseDeadlinePassesInTheQueueIsNotWritten(t *testing.T) {
	out := &heldOutput{started: make(chan []byte, 2), hold: make(chan struct{}, 2)}
	tr, stuck := startOver(t, out, nil)
	send := func(ctx context.Context, id string, errs chan<- error) {
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: []byte(`{}`)}})
		errs <- err
	}
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	first, second := make(chan error, 1), make(chan error, 1)
	go send(long, "gw-1", first)
	<-out.started // gw-1's write is under way, and held
	go send(short, "gw-2", second)
	for give := time.Now().Add(generous); pendingCount(tr) < 2; runtime.Gosched() {
		if time.Now().After(give) {
			t.Fatalf("%d requests registered, want 2", pendingCount(tr))
		}
	}
	select { // gw-2's deadline passes while it waits for its turn: it leaves then, gw-1's write still held
	case err := <-second:
		var ce *CallError
		if !errors.As(err, &ce) || ce.Where != NotSent || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("gw-2: %v, want not sent, its deadline named", err)
		}
	case <-time.After(generous):
		t.Fatal("gw-2 did not return at its deadline")
	}
	out.hold <- struct{}{} // gw-1's write ends
	if n := len(out.started); n != 0 {
		t.Fatalf("gw-2 was written (%d more writes)", n)
	}
	if len(stuck) != 0 || tr.isClosed() {
		t.Fatal("a request that missed its turn made the child look stuck")
	}
	cancelLong() // gw-1 still waits for an answer: end it
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("gw-1: %v, want cancelled while waiting for its answer", err)
	}
}

// timingOutOutput is a child's stdin whose writes are held (as
// heldOutput's), except that while timeouts is above zero a write times
// out at once having written nothing, and counts one down.
type timingOutOutput struct {
	heldOutput
	timeouts atomic.Int32
}

func (o *timingOutOutput) Write(p []byte) (int, error) {
	if o.timeouts.Add(-1) >= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	o.timeouts.Store(0)
	return o.heldOutput.Write(p)
}

// startOver starts a transport writing to out and reading from a pipe
// nobody writes; its onStuck counts on stuck. set, if given, adjusts it
// before Start. At cleanup it is closed, and no goroutine may be left.
func startOver(t *testing.T, out io.WriteCloser, set func(*lineTransport)) (tr *lineTransport, stuck chan struct{}) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	inR, inW := io.Pipe()
	tr = newLineTransport(inR, out)
	stuck = make(chan struct{}, 4)
	tr.onStuck = func() { stuck <- struct{}{} }
	if set != nil {
		set(tr)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.Close()
		inW.Close()
		goleak.VerifyNone(t, before)
	})
	return tr, stuck
}

// pipeOutput is a child's stdin that can time out a write: a pipe's write
// end, behind the watchedWriter, and its read end (closed at cleanup).
func pipeOutput(t *testing.T) (pr, pw *os.File, out *watchedWriter) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	return pr, pw, &watchedWriter{w: pw}
}

// newTimingOut starts a transport over a timingOutOutput; also, if given,
// sets more of it before it starts.
func newTimingOut(t *testing.T, stuckAfter time.Duration, also ...func(*lineTransport)) (tr *lineTransport, out *timingOutOutput, stuck chan struct{}) {
	t.Helper()
	out = &timingOutOutput{heldOutput: heldOutput{started: make(chan []byte, 4), hold: make(chan struct{}, 4)}}
	tr, stuck = startOver(t, out, func(tr *lineTransport) {
		tr.stuckAfter = stuckAfter
		for _, f := range also {
			f(tr)
		}
	})
	return tr, out, stuck
}

func echoRequest(id string) transport.JSONRPCRequest {
	return transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
		Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: []byte(`{}`)}}
}

// A write that times out having written nothing leaves the stream whole.
// It declares the child stuck only when the child took no message for at
// least stuckAfter; otherwise the request fails as not sent (a timeout),
// and the transport carries on. A notice is dropped either way.
func TestWriteTimedOutWithNothingWritten(t *testing.T) {
	ctx := func() context.Context { return callCtx(t, time.Minute) }
	t.Run("the child took a message meanwhile", func(t *testing.T) {
		// writeLine reads the clock right after it counts the writes done
		// (its mark): two reads, and gw-2 has its mark. Waiting for gw-2 to
		// be registered instead let gw-1's write complete before gw-2's
		// mark about one run in a hundred, and gw-2 then rightly saw a
		// child that took nothing while it waited.
		var clockReads atomic.Int32
		tr, out, stuck := newTimingOut(t, 0, func(tr *lineTransport) {
			tr.clock = func() time.Time { clockReads.Add(1); return time.Now() }
		})
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { _, err := tr.SendRequest(ctx(), echoRequest("gw-1")); first <- err }()
		<-out.started // gw-1's write is held
		go func() { _, err := tr.SendRequest(ctx(), echoRequest("gw-2")); second <- err }()
		for give := time.Now().Add(generous); clockReads.Load() < 2; runtime.Gosched() {
			if time.Now().After(give) {
				t.Fatalf("%d writes began, want 2", clockReads.Load())
			}
		}
		out.timeouts.Store(1)  // gw-2's write will time out, writing nothing
		out.hold <- struct{}{} // gw-1's write completes: the child took it
		err := <-second
		var ce *CallError
		if !errors.As(err, &ce) || ce.Where != NotSent || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("gw-2: %v, want not sent, a timeout", err)
		}
		if len(stuck) != 0 || tr.isClosed() {
			t.Fatal("declared stuck although the child took a message while gw-2 waited")
		}
		tr.Close()
		<-first
	})
	t.Run("nothing taken for long enough", func(t *testing.T) {
		tr, out, stuck := newTimingOut(t, 0)
		out.timeouts.Store(1)
		if _, err := tr.SendRequest(ctx(), echoRequest("gw-1")); !errors.Is(err, errWriteStuck) {
			t.Fatalf("gw-1: %v, want errWriteStuck", err)
		}
		if len(stuck) != 1 || !tr.isClosed() {
			t.Fatal("not declared stuck")
		}
	})
	t.Run("nothing taken in too short a wait", func(t *testing.T) {
		tr, out, stuck := newTimingOut(t, time.Hour)
		out.timeouts.Store(1)
		var ce *CallError
		if _, err := tr.SendRequest(ctx(), echoRequest("gw-1")); !errors.As(err, &ce) || ce.Where != NotSent {
			t.Fatalf("gw-1: %v, want not sent", err)
		}
		if len(stuck) != 0 || tr.isClosed() {
			t.Fatal("declared stuck after a wait shorter than stuckAfter")
		}
	})
	t.Run("a notice is dropped", func(t *testing.T) {
		tr, out, stuck := newTimingOut(t, 0)
		out.timeouts.Store(1)
		err := tr.SendNotification(ctx(), mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{Method: "notifications/cancelled"}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("notice: %v, want a timeout", err)
		}
		if len(stuck) != 0 || tr.isClosed() {
			t.Fatal("a notice that wrote nothing declared the child stuck")
		}
	})
}

// A call with progress (its request runs on a goroutine of its own) whose
// deadline passes while its request waits for its turn to be written is
// not written, and no cancellation naming it follows: the upstream never
// saw it.
func TestNoCancellationForARequestNeverWritten(t *testing.T) {
	t.Run("deadline", func(t *testing.T) { noCancellationWhenLeaving(t, false) })
	t.Run("cancelled", func(t *testing.T) { noCancellationWhenLeaving(t, true) })
}

// noCancellationWhenLeaving: gw-2's caller leaves (at its deadline, or
// cancelling) while gw-2 waits for its turn behind gw-1's held write.
func noCancellationWhenLeaving(t *testing.T, cancelling bool) {
	out := &heldOutput{started: make(chan []byte, 16), hold: make(chan struct{}, 16)}
	tr, _ := startOver(t, out, nil)
	c := &Conn{name: "s", tr: tr, log: slog.New(slog.DiscardHandler)}
	c.life, c.kill = context.WithCancelCause(context.Background())
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	first := make(chan error, 1)
	go func() { _, err := c.CallTool(long, "echo", json.RawMessage(`{}`)); first <- err }()
	<-out.started // gw-1's write is held
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	want := context.DeadlineExceeded
	if cancelling {
		short, cancelShort = context.WithCancel(context.Background())
		want = context.Canceled
		go func() {
			for pendingCount(tr) < 2 { // gw-2 registered: it waits for its turn
				runtime.Gosched()
			}
			cancelShort()
		}()
	}
	defer cancelShort()
	if _, err := c.CallToolProgress(short, "echo", json.RawMessage(`{}`), func(Progress) {}); !errors.Is(err, want) {
		t.Fatalf("gw-2: %v, want %v", err, want)
	}
	for range cap(out.hold) {
		out.hold <- struct{}{} // gw-1's write, and anything after it
	}
	c.bg.Wait() // gw-2's goroutine, and a cancellation if one was started
	for len(out.started) > 0 {
		if line := <-out.started; bytes.Contains(line, []byte("notifications/cancelled")) {
			t.Fatalf("a cancellation was written for a request never written: %s", line)
		}
	}
	cancelLong()
	<-first
}

// A child stuck under calls whose deadlines are all shorter than
// stuckAfter is still found: the time counts from the first of the
// requests that timed out with nothing written, no write completing since.
func TestStuckFoundUnderShortDeadlines(t *testing.T) {
	tr, out, stuck := newTimingOut(t, time.Second)
	var now time.Time
	var clockMu sync.Mutex
	tr.clock = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	at := func(d time.Duration) { clockMu.Lock(); now = time.Unix(1e9, 0).Add(d); clockMu.Unlock() }
	for i, d := range []time.Duration{0, 600 * time.Millisecond, 1100 * time.Millisecond} {
		at(d)
		out.timeouts.Store(1)
		_, err := tr.SendRequest(callCtx(t, time.Minute), echoRequest(fmt.Sprintf("gw-%d", i+1)))
		if i < 2 {
			var ce *CallError
			if !errors.As(err, &ce) || ce.Where != NotSent || len(stuck) != 0 {
				t.Fatalf("request %d at %v: %v (stuck %d), want not sent", i+1, d, err, len(stuck))
			}
			continue
		}
		if !errors.Is(err, errWriteStuck) || len(stuck) != 1 {
			t.Fatalf("request 3, 1.1 s after the first blocked one: %v (stuck %d), want the child declared stuck", err, len(stuck))
		}
	}
}
