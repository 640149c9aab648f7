// Package procs decides, while the gateway serves, how many processors run
// its Go code: one fewer than the CPUs it may use while its goroutines get
// a processor at once (calls come one at a time), every one while they
// queue for it (many callers at once).
//
// Why both: with stdio upstreams beside it on 2 CPUs (bench/, issue 22),
// one processor gives one caller over HTTP a p50 0.82-0.94 of the zero-check
// relay's where two give 1.16-1.23 (medians of 11 paired rounds), because an
// idle second processor spins looking for work on the CPU the upstream and
// the client need. Under load the one processor is a queue of its own, and
// a client on the same machine pays for it too (it is woken for each answer
// alone: 1.9 context switches a call against 1.3-1.6): 16 callers got
// 0.92-0.96 of the relay's throughput on one processor, 0.99-1.05 on two.
// With Run, against one processor fixed, in 11 paired rounds: 64 callers
// 1.14-1.18 times the calls a second, 16 callers 1.00-1.03, one caller's
// p50 0.96-0.98; for 13-16% more CPU a call at 16 callers.
//
// The signal is the runtime's own: how long goroutines waited, runnable,
// for a processor (/sched/latencies:seconds). On one processor, one caller
// keeps the mean wait at 15-62 µs per 100 ms window, 16 callers at
// 147-471 and 64 at 346-912. It cannot tell the other way (with every
// processor, waits are short under any load), so Run keeps every processor
// for a while (DefaultHold), then goes back to fewer and looks again.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// Defaults, each for a zero field of Options.
const (
	// DefaultWindow is how often Run looks at the waits: a window holds
	// a few hundred sampled waits at 16 callers (the runtime samples
	// them), enough for a stable mean.
	DefaultWindow = 100 * time.Millisecond
	// DefaultQueued is the mean wait from which goroutines count as
	// queuing for the processor: between one caller's highest window
	// (62 µs) and 16 callers' lowest (147).
	DefaultQueued = 100 * time.Microsecond
	// DefaultHold is how long Run keeps every processor before it tries
	// fewer again. Under steady load each try costs two windows on fewer
	// processors (0.2 s in 2.2 s, about a tenth of the time); after load
	// stops it takes up to this long to give the CPU back.
	DefaultHold = 2 * time.Second
	// windowsOver is how many windows in a row must show queuing before
	// Run adds the processor: one busy window (a collection, a burst of
	// tools/list) is not load.
	windowsOver = 2
	// minWaits is the fewest sampled waits a window needs to count: an
	// idle gateway's few wake-ups say nothing.
	minWaits = 20
)

// Options configure Run. Few and Many are required; every other field
// may be left zero.
type Options struct {
	// Few is the processors while goroutines get one at once, Many
	// while they queue; Many > Few >= 1.
	Few, Many int
	Window    time.Duration // see DefaultWindow
	Queued    time.Duration // see DefaultQueued
	Hold      time.Duration // see DefaultHold
	// Waits reads the runtime's histogram of how long goroutines waited
	// for a processor, cumulative; /sched/latencies:seconds when nil.
	Waits func() *metrics.Float64Histogram
	// Set applies a number of processors; runtime.GOMAXPROCS when nil.
	Set func(int)
	// Log gets a debug line on each change; nil logs nothing.
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Queued <= 0 {
		o.Queued = DefaultQueued
	}
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	if o.Waits == nil {
		o.Waits = runtimeWaits()
	}
	if o.Set == nil {
		o.Set = func(n int) { runtime.GOMAXPROCS(n) }
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run sets Few processors, then moves between Few and Many as described in
// the package comment until ctx ends; it returns with Few set (the setting
// a quiet gateway keeps). Options with Many <= Few or Few < 1 make it
// return at once, having set nothing.
func Run(ctx context.Context, o Options) {
	if o.Few < 1 || o.Many <= o.Few {
		return
	}
	o = o.withDefaults()
	o.Set(o.Few)
	defer o.Set(o.Few)
	tick := time.NewTicker(o.Window)
	defer tick.Stop()
	c := controller{o: o, prev: counts(o.Waits())}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			c.look(now)
		}
	}
}

// controller is Run's state between windows.
type controller struct {
	o     Options
	prev  []uint64 // the histogram's counts at the last look
	many  bool     // Many is set
	since time.Time
	over  int // windows in a row that showed queuing, while Few is set
}

// look reads the waits since the last look and changes the setting when
// they call for it.
func (c *controller) look(now time.Time) {
	h := c.o.Waits()
	mean, n := meanSince(h, c.prev)
	c.prev = counts(h)
	if c.many {
		if now.Sub(c.since) >= c.o.Hold {
			c.many, c.over = false, 0
			c.o.Set(c.o.Few)
			c.o.Log.Debug("processors: trying fewer", "gomaxprocs", c.o.Few)
		}
		return
	}
	if n >= minWaits && mean >= c.o.Queued {
		c.over++
	} else {
		c.over = 0
	}
	if c.over >= windowsOver {
		c.many, c.since, c.over = true, now, 0
		c.o.Set(c.o.Many)
		c.o.Log.Debug("processors: calls queue for the processor", "gomaxprocs", c.o.Many, "mean_wait_us", mean.Microseconds())
	}
}

// counts copies the histogram's counts: metrics.Read may reuse them.
func counts(h *metrics.Float64Histogram) []uint64 {
	if h == nil {
		return nil
	}
	return append([]uint64(nil), h.Counts...)
}

// meanSince is the mean of the waits counted in h since prev (each taken
// at its bucket's lower bound, so an underestimate by at most a bucket's
// width), and how many there were.
func meanSince(h *metrics.Float64Histogram, prev []uint64) (time.Duration, uint64) {
	if h == nil {
		return 0, 0
	}
	var n uint64
	var sum float64
	for i, c := range h.Counts {
		if i < len(prev) {
			c -= prev[i]
		}
		n += c
		if lo := h.Buckets[i]; lo > 0 && lo < 1e9 {
			sum += float64(c) * lo
		}
	}
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second)), n
}

// runtimeWaits reads /sched/latencies:seconds.
func runtimeWaits() func() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	return func() *metrics.Float64Histogram {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64Histogram {
			return nil
		}
		return s[0].Value.Float64Histogram()
	}
}
