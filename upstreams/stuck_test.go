package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/testkit"
)

// A child that stops reading its input is declared down once, however many
// calls meet its blocked input at their deadlines, on the inline path and on
// the goroutine path that calls with progress take. Every call ends as its
// deadline or as not sent, never as sent and lost; the log says it once.
func TestChildThatStopsReadingIsDeclaredDownOnce(t *testing.T) {
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<19) + `"}`) // far more than a 64 KiB pipe buffer
	for _, progress := range []bool{false, true} {
		name := map[bool]string{false: "inline", true: "progress"}[progress]
		t.Run(name, func(t *testing.T) {
			h := start(t, servers(stdioServer(t, "s")))
			mustCall(t, h.set, "s", "stop_reading", `{}`)
			const calls = 4
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second) // well past building a 512 KiB line under -race
					defer cancel()
					if progress {
						_, errs[i] = h.set.CallToolProgress(ctx, "s", "echo", big, func(Progress) {})
					} else {
						_, errs[i] = h.set.CallTool(ctx, "s", "echo", big)
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				var ce *CallError
				if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ce) && ce.Where == NotSent) {
					t.Errorf("call %d: %v, want the deadline or not sent", i, err)
				}
			}
			h.waitStatus(t, "s", false)
			if n := strings.Count(h.logs.String(), "stopped reading its input; stopping it"); n != 1 {
				t.Fatalf("declared stuck %d times, want once; log:\n%s", n, h.logs)
			}
		})
	}
}

// A message without a deadline of its own (here a notification) is bounded
// too: when the child stops reading, it times out, declares the child
// stuck, and the request waiting for its turn behind it fails as not sent
// at once, long before its own deadline.
func TestUntimedWriteIsBounded(t *testing.T) {
	_, pw, out := pipeOutput(t)
	tr, stuck := startOver(t, out, func(tr *lineTransport) { tr.untimedBound = 200 * time.Millisecond })
	fillPipe(t, pw)
	noted := make(chan error, 1)
	go func() {
		noted <- tr.SendNotification(context.Background(), mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{Method: "notifications/cancelled"}})
	}()
	for give := time.Now().Add(generous); len(tr.writeTurn) == 0; runtime.Gosched() { // the notification holds the turn
		if time.Now().After(give) {
			t.Fatal("the notification did not take its turn")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("gw-1"),
		Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: json.RawMessage(`{}`)}})
	if !errors.Is(err, errNotStarted) || ctx.Err() != nil {
		t.Fatalf("request behind the blocked notification: %v (its context: %v), want not sent before its deadline", err, ctx.Err())
	}
	var ce *CallError
	if err := <-noted; !errors.Is(err, errWriteStuck) || !errors.As(err, &ce) || ce.Where != NotSent {
		t.Fatalf("notification: %v, want errWriteStuck, not sent (nothing of it was written)", err)
	}
	if n := len(stuck); n != 1 {
		t.Fatalf("declared stuck %d times, want once", n)
	}
}

// fillPipe writes to w until its pipe is full: the next write blocks.
func fillPipe(t *testing.T, w *os.File) {
	t.Helper()
	if err := w.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 1<<20)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("filling the pipe: %v", err)
	}
	if err := w.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// A stuck write fails the requests waiting for their answers; the child's
// cause is still "stopped reading its input", and a connection no
// supervisor owns stops its child itself.
func TestStuckChildOfAnUnsupervisedConnIsStopped(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var logs testkit.LogBuffer
	conn, err := Dial(callCtx(t, generous), stdioServer(t, "s"), 1<<20, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.Close()
		goleak.VerifyNone(t, before)
	}()
	lt := conn.tr.(*lineTransport)
	waiting := make(chan error, 1)
	go func() {
		_, err := conn.CallTool(callCtx(t, generous), "tick", json.RawMessage(`{"ms":60000}`))
		waiting <- err
	}()
	for give := time.Now().Add(generous); pendingCount(lt) < 1; runtime.Gosched() {
		if time.Now().After(give) {
			t.Fatal("the waiting call was not sent")
		}
	}
	if _, err := conn.CallTool(callCtx(t, generous), "stop_reading", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<19) + `"}`)
	if _, err := conn.CallTool(callCtx(t, time.Second), "echo", big); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the blocked call: %v, want its deadline", err)
	}
	if err := <-waiting; err == nil {
		t.Fatal("the call waiting for its answer succeeded after the transport shut down")
	}
	if cause := conn.Err(); cause == nil || !strings.Contains(cause.Error(), "stopped reading its input") {
		t.Fatalf("connection's cause %v, want stopped reading its input", cause)
	}
	select {
	case <-conn.proc.exited:
	case <-time.After(generous):
		t.Fatalf("the stuck child was not stopped; log:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "stopped reading its input; stopping it"); n != 1 {
		t.Fatalf("declared stuck %d times, want once; log:\n%s", n, logs.String())
	}
}

// A connection already marked down for another reason (a request failed by
// the same stuck write may get there first) still stops a stuck child when
// no supervisor owns it.
func TestStuckAfterMarkedDownStillStopsTheChild(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var logs testkit.LogBuffer
	conn, err := Dial(callCtx(t, generous), stdioServer(t, "s"), 1<<20, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.Close()
		goleak.VerifyNone(t, before)
	}()
	conn.noteFailure(transport.ErrTransportClosed)
	conn.stuck()
	select {
	case <-conn.proc.exited:
	case <-time.After(generous):
		t.Fatalf("the stuck child was not stopped; log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "stopped reading its input; stopping it") {
		t.Fatalf("stuck not logged:\n%s", logs.String())
	}
}

// A request without a deadline of its own is written for as long as the
// child takes its bytes; when a whole untimedBound passes with none taken,
// the child is declared stuck and the request ends (it does not wait for
// a deadline it has not got).
func TestRequestWithoutDeadlineEndsWhenTheChildStopsReading(t *testing.T) {
	before := goleak.IgnoreCurrent()
	conn, err := Dial(callCtx(t, generous), stdioServer(t, "s"), 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.Close()
		goleak.VerifyNone(t, before)
	}()
	conn.tr.(*lineTransport).untimedBound = 300 * time.Millisecond
	if _, err := conn.CallTool(callCtx(t, generous), "stop_reading", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<19) + `"}`)
	done := make(chan error, 1)
	go func() { _, err := conn.CallTool(context.Background(), "echo", big); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errWriteStuck) {
			t.Fatalf("the call: %v, want the stuck write", err)
		}
	case <-time.After(generous):
		t.Fatal("a call without a deadline hangs after its child was declared stuck")
	}
	if conn.Alive() {
		t.Fatal("the connection is still alive")
	}
}

// A message without a deadline is written for as long as the child keeps
// taking its bytes, however long that is in all: a slow child is not a
// stuck one.
func TestUntimedWriteToASlowReaderCompletes(t *testing.T) {
	pr, _, out := pipeOutput(t)
	tr, stuck := startOver(t, out, func(tr *lineTransport) { tr.untimedBound = 200 * time.Millisecond })
	readerDone := make(chan struct{})
	stopReading := make(chan struct{})
	go func() { // the slow child: 16 KiB every 100 ms, so 64 KiB + a window of 200 ms is never idle
		defer close(readerDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		buf := make([]byte, 16<<10)
		for {
			select {
			case <-stopReading:
				return
			case <-tick.C:
				if _, err := io.ReadFull(pr, buf); err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(stopReading)
		tr.Close() // ends a read the slow child is in
		<-readerDone
	}()
	pad := strings.Repeat("x", 256<<10)
	err := tr.SendNotification(context.Background(), mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: "notifications/message", Params: mcp.NotificationParams{AdditionalFields: map[string]any{"pad": pad}}}})
	if err != nil || len(stuck) != 0 {
		t.Fatalf("notification to a slow reader: %v (stuck %d), want written", err, len(stuck))
	}
}
