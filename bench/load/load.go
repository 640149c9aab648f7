// Package load is the load client's driver: one worker per session, each
// issuing calls back to back for a fixed time, every call's latency kept.
// It knows nothing about MCP; a Session makes the call.
package load

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one client session that can make the measured call. seq is
// unique in the process, so no two calls ever carry the same arguments:
// a gateway that suppresses duplicate calls must run every one of them.
type Session interface {
	Call(ctx context.Context, seq int64) error
}

// seq numbers every call of the process (see Session).
var seq atomic.Int64

// Result is what one run of Run measured.
type Result struct {
	Latencies  []time.Duration // successful and failed calls alike, sorted
	Errors     int
	FirstError string
	Elapsed    time.Duration // from the first call's start to the last one's end
}

// Calls is how many calls completed.
func (r Result) Calls() int { return len(r.Latencies) }

// Throughput is completed calls per second.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Quantile is the q-quantile (0..1) of the latencies, nearest rank.
func (r Result) Quantile(q float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	i := int(q*float64(n)+0.5) - 1
	return r.Latencies[min(max(i, 0), n-1)]
}

// Run drives each session with its own worker, calls back to back, until d
// has passed; calls then in flight finish and count. Each call gets
// callTimeout, so a hung target ends the run rather than the harness.
func Run(ctx context.Context, sessions []Session, d, callTimeout time.Duration) Result {
	type worker struct {
		lat   []time.Duration
		errs  int
		first error
	}
	workers := make([]worker, len(sessions))
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i, s := range sessions {
		w := &workers[i]
		w.lat = make([]time.Duration, 0, 4096)
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				err := s.Call(cctx, seq.Add(1))
				cancel()
				t1 := time.Now()
				w.lat = append(w.lat, t1.Sub(t0))
				if err != nil {
					w.errs++
					if w.first == nil {
						w.first = err
					}
				}
				if !t1.Before(deadline) {
					return
				}
			}
		})
	}
	wg.Wait()
	r := Result{Elapsed: time.Since(start)}
	for _, w := range workers {
		r.Latencies = append(r.Latencies, w.lat...)
		r.Errors += w.errs
		if w.first != nil && r.FirstError == "" {
			r.FirstError = w.first.Error()
		}
	}
	slices.Sort(r.Latencies)
	return r
}
