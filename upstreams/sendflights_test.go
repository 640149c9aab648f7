package upstreams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

// heldOutput is a child's stdin that can time out a write: each Write
// reports itself on started and waits for a value on hold; the deadline
// each was given is kept.
type heldOutput struct {
	started   chan []byte
	hold      chan struct{}
	deadline  time.Time
	deadlines []time.Time
}

func (h *heldOutput) Write(p []byte) (int, error) {
	h.deadlines = append(h.deadlines, h.deadline)
	h.started <- bytes.Clone(p)
	<-h.hold
	return len(p), nil
}

func (h *heldOutput) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() {
		h.deadline = t
	}
	return nil
}

func (h *heldOutput) canTimeOut() bool { return true }
func (h *heldOutput) Close() error     { return nil }

// heldTransport starts a transport writing to a heldOutput and reading
// what the test writes to in; at cleanup it closes both and checks that no
// goroutine is left. Not in a synctest bubble: pending calls are pooled
// with their channels, which a bubble must not share with other tests.
func heldTransport(t *testing.T) (tr *lineTransport, out *heldOutput, in *io.PipeWriter) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	out = &heldOutput{started: make(chan []byte), hold: make(chan struct{})}
	inR, in := io.Pipe()
	tr = newLineTransport(inR, out)
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.Close()
		in.Close()
		goleak.VerifyNone(t, before)
	})
	return tr, out, in
}

// Requests that come while another is being written go out together next,
// in one write, in the order they came, bounded by the latest of their
// deadlines (one caller's short deadline must not fail the others' requests
// to a child that is slow, not stuck); each still gets its own answer.
func TestRequestsDuringAWriteShareTheNext(t *testing.T) {
	tr, out, inW := heldTransport(t)
	answers := make(chan error, 4)
	deadlines := make([]time.Time, 5)
	send := func(id int, within time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		deadlines[id], _ = ctx.Deadline()
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fmt.Sprintf("gw-%d", id)),
			Method: "tools/call", Params: toolCallParams{Name: "echo", Arguments: []byte(`{}`)}}
		resp, err := tr.SendRequest(ctx, req)
		if err == nil && string(resp.Result) != fmt.Sprintf(`{"n":%d}`, id) {
			err = fmt.Errorf("gw-%d got %s", id, resp.Result)
		}
		answers <- err
	}
	go send(1, 10*time.Second)
	first := <-out.started
	for id, within := range []time.Duration{2: 20 * time.Second, 3: 5 * time.Second, 4: 30 * time.Second} {
		if id >= 2 {
			go send(id, within)
			waitBoarded(t, tr, id-1) // in this order
		}
	}
	out.hold <- struct{}{}
	second := <-out.started
	out.hold <- struct{}{}
	if n := bytes.Count(first, []byte("\n")); n != 1 {
		t.Fatalf("first write carried %d lines, want 1", n)
	}
	if n := bytes.Count(second, []byte("\n")); n != 3 {
		t.Fatalf("second write carried %d lines, want the 3 that came meanwhile: %s", n, second)
	}
	if i2, i3, i4 := bytes.Index(second, []byte(`"gw-2"`)), bytes.Index(second, []byte(`"gw-3"`)), bytes.Index(second, []byte(`"gw-4"`)); !(i2 >= 0 && i2 < i3 && i3 < i4) {
		t.Fatalf("second write out of order: %s", second)
	}
	if got, want := out.deadlines[1], deadlines[4]; !got.Equal(want) {
		t.Fatalf("second write bounded at %v, want the latest deadline, gw-4's %v", got, want)
	}
	for id := 1; id <= 4; id++ {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":"gw-%d","result":{"n":%d}}`+"\n", id, id)
	}
	for range 4 {
		if err := <-answers; err != nil {
			t.Fatal(err)
		}
	}
}

// waitBoarded waits until n requests wait on the boarding flight.
func waitBoarded(t *testing.T, tr *lineTransport, n int) {
	t.Helper()
	for give := time.Now().Add(generous); tr.sends.Boarding() < n; runtime.Gosched() {
		if time.Now().After(give) {
			t.Fatalf("%d requests boarded, want %d", tr.sends.Boarding(), n)
		}
	}
}

// A flight that departs after the transport closed writes nothing: its
// requests fail as not sent (they may be retried), not as sent.
func TestFlightAfterCloseIsNotSent(t *testing.T) {
	tr, out, _ := heldTransport(t)
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
	waitBoarded(t, tr, 1)
	tr.Close()
	out.hold <- struct{}{} // gw-1's write ends; it was sent, and the close ended its wait
	if err := <-first; !errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, errNotStarted) {
		t.Fatalf("gw-1: %v, want closed after it was sent", err)
	}
	if err := <-second; !errors.Is(err, errNotStarted) {
		t.Fatalf("gw-2: %v, want not sent", err)
	}
	if n := len(out.deadlines); n != 1 {
		t.Fatalf("%d writes, want only gw-1's", n)
	}
}
