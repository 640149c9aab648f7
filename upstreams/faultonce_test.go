package upstreams_test

// These tests drive the execute link over a real stdio upstream (this test
// binary, run as the test upstream by TestMain in harness_test.go), so the
// line transport's failures reach a real circuit breaker.

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

// faultChain is a chain (with the test catalog's links) over "orders", the
// test upstream over stdio; its breaker opens after 5 consecutive failures,
// for 30s.
func faultChain(t *testing.T) (*pipelinetest.Builder, *upstreams.Set) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := upstreams.Server{Name: "orders", Transport: upstreams.TransportStdio, Command: exe, ToolPrefix: "orders__",
		Args: []string{"-name", "orders"}, Env: map[string]string{"TOOLGATE_UPSTREAMS_TESTUPSTREAM": "1", "GORACE": "atexit_sleep_ms=0"},
		InitTimeout: 30 * time.Second, CallTimeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set, err := upstreams.Start(ctx, []upstreams.Server{srv}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	if up, why := set.Status("orders"); !up {
		t.Fatalf("orders is not up: %s", why)
	}
	b := pipelinetest.NewBuilder(t, set)
	b.Catalog = set.Catalog()
	b.Policy = pipelinetest.Policy{Allow: map[string]bool{
		"alice orders/sleep": true, "alice orders/wrong_id": true, "alice orders/split_line": true,
		"alice orders/crash": true, "alice orders/echo": true,
	}}
	b.Resilience = pipeline.Resilience{Breakers: breaker.NewSet(map[string]breaker.Settings{"orders": {Failures: 5, OpenFor: 30 * time.Second}}, nil)}
	return b, set
}

func call(tool, args string) pipeline.Call {
	return pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__" + tool, Args: []byte(args)}
}

// waitingCalls starts n calls of sleep that wait on the upstream (each has
// reported its progress, so its request is in flight) and returns their
// error codes, once all have ended.
func waitingCalls(t *testing.T, chain *pipeline.Chain, n int) <-chan []string {
	t.Helper()
	codes := make([]string, n)
	var started, ended sync.WaitGroup
	started.Add(n)
	ended.Add(n)
	for i := range n {
		c := call("sleep", `{"ms":20000}`)
		var once sync.Once
		c.Progress = func(upstreams.Progress) { once.Do(started.Done) }
		go func() {
			defer ended.Done()
			codes[i] = pipelinetest.Code(pipelinetest.Envelope(t, chain.Handle(context.Background(), c)))
		}()
	}
	waited := make(chan struct{})
	go func() { started.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the sleep calls never reached the upstream")
	}
	out := make(chan []string, 1)
	go func() { ended.Wait(); out <- codes }()
	return out
}

func endedWith(t *testing.T, codes <-chan []string, want string) {
	t.Helper()
	select {
	case got := <-codes:
		for i, code := range got {
			if code != want {
				t.Errorf("waiting call %d: %q, want %q", i, code, want)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting calls never ended")
	}
}

// One stray line from a stdio upstream (an answer under an id no request
// has, or a line split by a raw newline) fails every call waiting on the
// connection, since it could be the answer to any of them; that is one
// fault of the connection, so it counts once against the breaker: with
// more calls waiting than the breaker's failures, the breaker stays closed
// and the next call goes through. Four more faults, each failing a single
// call, then open it: the first fault counted exactly once.
func TestStrayLineCountsOnceAgainstBreaker(t *testing.T) {
	for _, stray := range []string{"wrong_id", "split_line"} {
		t.Run(stray, func(t *testing.T) {
			b, _ := faultChain(t)
			chain := b.Chain()
			codes := waitingCalls(t, chain, 6)
			if code := pipelinetest.Code(pipelinetest.Envelope(t, chain.Handle(context.Background(), call(stray, `{}`)))); code != "upstream_error" {
				t.Fatalf("%s: %q, want upstream_error", stray, code)
			}
			endedWith(t, codes, "upstream_error")
			if st := b.Resilience.Breakers.State("orders"); st != "closed" {
				t.Fatalf("breaker %s after one stray line failed 7 waiting calls", st)
			}
			if env := pipelinetest.Envelope(t, chain.Handle(context.Background(), call("echo", `{"after":1}`))); !env.OK {
				t.Fatalf("the call after the stray line: %s %v", pipelinetest.Code(env), *env.Message)
			}
			// The echo reset the count. A fault failing 7 calls again, then 3
			// failing one each: 4 failures, closed; a 5th opens it. (The
			// single faults are wrong ids: a split line right after another
			// one is taken as its rest, see lineTransport.broken.)
			codes = waitingCalls(t, chain, 6)
			chain.Handle(context.Background(), call(stray, `{}`))
			endedWith(t, codes, "upstream_error")
			for i := range 3 {
				chain.Handle(context.Background(), call("wrong_id", `{}`))
				if st := b.Resilience.Breakers.State("orders"); st != "closed" {
					t.Fatalf("breaker %s after %d failures", st, i+2)
				}
			}
			chain.Handle(context.Background(), call("wrong_id", `{}`))
			if st := b.Resilience.Breakers.State("orders"); st != "open" {
				t.Fatalf("breaker %s after 5 faults", st)
			}
		})
	}
}

// The child exiting with calls waiting fails them all: one fault, counted
// once (the restart is the supervisor's business).
func TestExitCountsOnceAgainstBreaker(t *testing.T) {
	b, _ := faultChain(t)
	chain := b.Chain()
	codes := waitingCalls(t, chain, 6)
	if code := pipelinetest.Code(pipelinetest.Envelope(t, chain.Handle(context.Background(), call("crash", `{}`)))); code != "upstream_error" {
		t.Fatalf("crash: %q, want upstream_error", code)
	}
	endedWith(t, codes, "upstream_error")
	if st := b.Resilience.Breakers.State("orders"); st != "closed" {
		t.Fatalf("breaker %s after one exit failed 7 waiting calls", st)
	}
}
