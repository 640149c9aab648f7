package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testupstream"
)

// progressServers starts the test upstream over each transport.
func progressServers(t *testing.T) []*Server {
	t.Helper()
	httpURL, stopHTTP, err := testupstream.StartHTTP(testupstream.Options{Name: "http"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopHTTP)
	sseURL, stopSSE, err := testupstream.StartSSE(testupstream.Options{Name: "sse"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopSSE)
	return []*Server{
		stdioServer(t, "stdio"),
		{Name: "http", ToolPrefix: "http__", Transport: TransportHTTP, Egress: loopbackOK, URL: httpURL},
		{Name: "sse", ToolPrefix: "sse__", Transport: TransportSSE, Egress: loopbackOK, URL: sseURL},
	}
}

// Concurrent calls each get their own progress, increasing, and none after
// they returned. Over Streamable HTTP notifications can be lost (mcp-go
// trap 5; with concurrent calls on one session more than the last one, see
// progressRoute) and arrive out of order (the out-of-order ones are
// dropped): assert "only own, and most of them".
func TestProgressRoutedToItsOwnCall(t *testing.T) {
	srvs := progressServers(t)
	h := start(t, servers(srvs...))
	for _, srv := range srvs {
		t.Run(srv.Name, func(t *testing.T) {
			const calls = 20
			var wg sync.WaitGroup
			got := make([]int, calls)
			for i := range calls {
				steps := 10 + i // tells the calls' notifications apart
				wg.Go(func() {
					var returned atomic.Bool
					last := 0.0
					onProgress := func(p Progress) {
						switch {
						case returned.Load():
							t.Errorf("call %d: progress after the call returned", i)
						case p.Total == nil || *p.Total != float64(steps):
							t.Errorf("call %d (%d steps) got another call's progress: %+v", i, steps, p)
						case p.Progress <= last:
							t.Errorf("call %d: progress went from %v to %v", i, last, p.Progress)
						case p.Message != fmt.Sprintf("step %d of %d", int(p.Progress), steps):
							t.Errorf("call %d: message %q", i, p.Message)
						}
						last = p.Progress
						got[i]++
					}
					raw, err := h.set.CallToolProgress(callCtx(t, generous), srv.Name, "progress",
						json.RawMessage(fmt.Sprintf(`{"steps":%d,"ms":5}`, steps)), onProgress)
					returned.Store(true)
					if err != nil {
						t.Errorf("call %d: %v", i, err)
						return
					}
					if text := firstText(t, raw); text != fmt.Sprintf("done %d steps", steps) {
						t.Errorf("call %d: %s", i, text)
					}
				})
			}
			wg.Wait()
			total, want := 0, 0
			for i, n := range got {
				total += n
				want += 10 + i
			}
			t.Logf("%s: %d of %d notifications delivered", srv.Name, total, want)
			if total < want/2 {
				t.Errorf("%s: only %d of %d notifications delivered", srv.Name, total, want)
			}
		})
	}
}

// A consumer that blocks does not block the connection: other calls on it
// are answered meanwhile, and the call ends once the consumer is back.
func TestSlowProgressConsumerDoesNotBlockTheConnection(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s")))
	release := make(chan struct{})
	first := make(chan struct{})
	var delivered []Progress
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := h.set.CallToolProgress(callCtx(t, generous), "s", "progress", json.RawMessage(`{"steps":200,"ms":1}`), func(p Progress) {
			delivered = append(delivered, p)
			once.Do(func() {
				close(first)
				<-release
			})
		})
		done <- err
	}()
	select {
	case <-first:
	case <-time.After(generous):
		t.Fatal("no progress")
	}
	// The consumer is stuck; the connection is not.
	if got := mustCall(t, h.set, "s", "echo", `{"meanwhile":1}`); got != `{"meanwhile":1}` {
		t.Fatal(got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lastP := delivered[len(delivered)-1].Progress; lastP < 150 {
		t.Errorf("last progress delivered %v of 200", lastP)
	}
}

// What piles up for a slow consumer is bounded, the newest kept; progress
// that does not increase is dropped.
func TestProgressRouteCoalescesAndStaysMonotonic(t *testing.T) {
	r := newProgressRoute()
	for i := 1; i <= 300; i++ {
		r.push(Progress{Progress: float64(i)})
	}
	r.push(Progress{Progress: 299}) // late, out of order
	var got []float64
	r.deliver(func(p Progress) { got = append(got, p.Progress) })
	if len(got) != maxQueuedProgress || got[0] != 1 || got[len(got)-1] != 300 {
		t.Fatalf("delivered %d, first %v, last %v", len(got), got[0], got[len(got)-1])
	}
	var routes progressRoutes
	r = routes.add("tok")
	routes.route(map[string]any{"progressToken": "tok", "progress": 1.0, "total": 2.0, "message": "a\x1b[31mb"})
	routes.route(map[string]any{"progressToken": "other", "progress": 2.0})
	routes.route(map[string]any{"progressToken": "tok", "progress": "NaN"})
	routes.route(map[string]any{"progressToken": 7.0, "progress": 3.0})
	routes.remove("tok")
	routes.route(map[string]any{"progressToken": "tok", "progress": 4.0})
	var ps []Progress
	r.deliver(func(p Progress) { ps = append(ps, p) })
	if len(ps) != 1 || ps[0].Progress != 1 || *ps[0].Total != 2 || ps[0].Message != "ab" {
		t.Fatalf("routed %+v", ps)
	}
}

func TestProgressTokensAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := newProgressToken()
		if seen[tok] || !strings.HasPrefix(tok, "tg-") {
			t.Fatalf("token %q repeated or malformed", tok)
		}
		seen[tok] = true
	}
}

// Protocol abuse by a stdio upstream, each answered the right way.
func TestHostileStdioModes(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s")))

	t.Run("wrong id fails at once", func(t *testing.T) {
		_, err := h.set.CallTool(callCtx(t, generous), "s", "wrong_id", json.RawMessage(`{}`))
		if wantWhere(t, err, Sent); !errors.Is(err, errGarbage) {
			t.Fatalf("wrong_id: %v, want the reply taken as garbage", err)
		}
		if got := mustCall(t, h.set, "s", "echo", `{"next":1}`); got != `{"next":1}` {
			t.Fatalf("after wrong_id: %s", got)
		}
	})
	t.Run("stdout noise is skipped", func(t *testing.T) {
		if got := mustCall(t, h.set, "s", "stdout_noise", `{}`); got != testupstream.NoiseAnswer {
			t.Fatal(got)
		}
	})
	t.Run("drip is reassembled", func(t *testing.T) {
		got := mustCall(t, h.set, "s", "drip", `{"bytes":3000,"chunk":97,"ms_per_chunk":1}`)
		if len(got) != 3000 || strings.Trim(got, "x") != "" {
			t.Fatalf("drip: %d bytes", len(got))
		}
	})
	t.Run("cancellation reaches an upstream that ignores it", func(t *testing.T) {
		before := len(cancelled(t, h.set, "s", 0))
		_, err := h.set.CallTool(callCtx(t, 200*time.Millisecond), "s", "ignore_cancel", json.RawMessage(`{"ms":1500}`))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ignore_cancel: %v", err)
		}
		ids := cancelled(t, h.set, "s", before+1)
		if len(ids) != before+1 || !regexp.MustCompile(`^"gw-\d+"$`).MatchString(ids[before]) {
			t.Fatalf("cancelled %v", ids)
		}
	})
	t.Run("a caller's own cancel is sent upstream too", func(t *testing.T) {
		before := len(cancelled(t, h.set, "s", 0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := h.set.CallToolProgress(ctx, "s", "progress", json.RawMessage(`{"steps":1000,"ms":20}`),
			func(Progress) { cancel() })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("progress: %v", err)
		}
		if ids := cancelled(t, h.set, "s", before+1); len(ids) != before+1 {
			t.Fatalf("cancelled %v", ids)
		}
	})
}

// cancelled asks the upstream which request ids it got
// notifications/cancelled for, waiting for at least n.
func cancelled(t *testing.T, s *Set, server string, n int) []string {
	t.Helper()
	raw, err := s.CallTool(callCtx(t, generous), server, "cancelled_requests", json.RawMessage(fmt.Sprintf(`{"wait_for":%d,"ms":20000}`, n)))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Cancelled []string `json:"cancelled"`
	}
	if err := json.Unmarshal([]byte(firstText(t, raw)), &res); err != nil {
		t.Fatal(err)
	}
	return res.Cancelled
}

// An endless answer is cut by the cap at once, without the gateway holding
// it; the connection is given up after a bounded amount and restarted.
func TestEndlessAnswerIsCut(t *testing.T) {
	srv := stdioServer(t, "s")
	srv.MaxResultBytes = 64 << 10
	h := start(t, servers(srv, stdioServer(t, "other")))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	_, err := h.set.CallTool(callCtx(t, generous), "s", "endless", json.RawMessage(`{}`))
	ce := wantWhere(t, err, Answered)
	if !ce.Oversize {
		t.Fatalf("endless: %v, want oversize", err)
	}
	t.Logf("cut after %s", time.Since(began))
	// The stream behind it is unusable: it is given up, and the upstream
	// restarted.
	down := h.waitStatus(t, "s", false)
	if !strings.Contains(down.why, "without end") {
		t.Errorf("down because %q", down.why)
	}
	runtime.ReadMemStats(&after)
	limit := (&capReader{max: srv.maxMessageBytes()}).discardLimit()
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d MiB streamed past, %d MiB allocated meanwhile", limit>>20, grew>>20)
	if grew > uint64(limit)/2 {
		t.Errorf("allocated %d bytes while streaming past %d", grew, limit)
	}
	if got := mustCall(t, h.set, "other", "echo", `{}`); got != `{}` {
		t.Errorf("other: %s", got)
	}
	h.gate.next(t)
	h.gate.open(t)
	h.waitStatus(t, "s", true)
	mustCall(t, h.set, "s", "echo", `{}`)
}

// Over Streamable HTTP an answer labelled for another request is refused at
// once (mcp-go's client would take it); over legacy SSE, where answers are
// matched by id, the caller times out as over stdio.
func TestWrongIDOverHTTP(t *testing.T) {
	srvs := progressServers(t)
	h := start(t, servers(srvs[1:]...))
	_, err := h.set.CallTool(callCtx(t, generous), "http", "wrong_id", json.RawMessage(`{}`))
	if ce := wantWhere(t, err, Sent); !strings.Contains(ce.Error(), "answer carries id") {
		t.Fatalf("http: %v", err)
	}
	_, err = h.set.CallTool(callCtx(t, 300*time.Millisecond), "sse", "wrong_id", json.RawMessage(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sse: %v", err)
	}
	for _, s := range []string{"http", "sse"} {
		if got := mustCall(t, h.set, s, "echo", `{"ok":1}`); got != `{"ok":1}` {
			t.Errorf("%s after wrong_id: %s", s, got)
		}
	}
}
