package procs

import (
	"context"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRuntime is the runtime as Run sees it: a histogram of waits the test
// adds to, and the settings Run made.
type fakeRuntime struct {
	mu   sync.Mutex
	h    metrics.Float64Histogram
	sets []int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{h: metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 10e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, math.Inf(1)},
		Counts:  make([]uint64, 8),
	}}
}

// wait adds n waits of at least lo seconds.
func (f *fakeRuntime) wait(n int, lo float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.h.Buckets, lo)
	f.h.Counts[i] += uint64(n)
}

func (f *fakeRuntime) waits() *metrics.Float64Histogram {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.h
	h.Counts = slices.Clone(f.h.Counts)
	return &h
}

func (f *fakeRuntime) set(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, n)
}

func (f *fakeRuntime) settings() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sets)
}

// start runs Run on f in the bubble; the returned function ends it and
// waits for it to return.
func (f *fakeRuntime) start(o Options) (stop func()) {
	o.Waits, o.Set = f.waits, f.set
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, o) }()
	synctest.Wait()
	return func() { cancel(); <-done }
}

// window lets one window pass in which n waits of lo seconds happened.
func (f *fakeRuntime) window(n int, lo float64) {
	f.wait(n, lo)
	time.Sleep(DefaultWindow)
	synctest.Wait()
}

func wantSettings(t *testing.T, f *fakeRuntime, want ...int) {
	t.Helper()
	if got := f.settings(); !slices.Equal(got, want) {
		t.Fatalf("settings %v, want %v", got, want)
	}
}

// One caller's waits (tens of µs) keep the fewer processors, however long.
func TestQuietKeepsFew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		for range 100 {
			f.window(100, 10e-6)
			f.window(100, 50e-6)
		}
		wantSettings(t, f, 1)
		stop()
		wantSettings(t, f, 1, 1)
	})
}

// Two windows of queuing add the processor; after the hold Run tries fewer
// again, and a load that goes on adds it again two windows later.
func TestQueuingAddsTheProcessorAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		defer stop()
		f.window(300, 200e-6)
		wantSettings(t, f, 1)
		f.window(300, 200e-6)
		wantSettings(t, f, 1, 2)
		for range DefaultHold/DefaultWindow - 1 {
			f.window(300, 10e-6) // short waits on every processor: no signal
		}
		wantSettings(t, f, 1, 2)
		f.window(300, 10e-6)
		wantSettings(t, f, 1, 2, 1)
		f.window(300, 500e-6)
		f.window(300, 500e-6)
		wantSettings(t, f, 1, 2, 1, 2)
	})
}

// One busy window (a collection, a burst) between quiet ones is not load.
func TestOneBusyWindowIsNotLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 3, Many: 4})
		defer stop()
		for range 10 {
			f.window(300, 1e-3)
			f.window(300, 10e-6)
		}
		wantSettings(t, f, 3)
	})
}

// A window with too few waits to count says nothing, even long ones.
func TestTooFewWaitsSayNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		defer stop()
		for range 10 {
			f.window(minWaits-1, 1e-3)
		}
		wantSettings(t, f, 1)
	})
}

// Run leaves the fewer processors set when it ends while holding more.
func TestStopLeavesFew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		f.window(300, 1e-3)
		f.window(300, 1e-3)
		stop()
		wantSettings(t, f, 1, 2, 1)
	})
}

// Options that leave nothing to choose make Run return at once, having
// set nothing.
func TestNothingToChoose(t *testing.T) {
	for _, o := range []Options{{Few: 2, Many: 2}, {Few: 0, Many: 2}, {Few: 3, Many: 1}} {
		f := newFakeRuntime()
		o.Waits, o.Set = f.waits, f.set
		Run(context.Background(), o) // returns: the context never ends
		wantSettings(t, f)
	}
}

// The mean counts only the waits since the last look, each at its bucket's
// lower bound, and ignores the open-ended buckets' infinities.
func TestMeanSince(t *testing.T) {
	f := newFakeRuntime()
	f.wait(10, 10e-6)
	prev := counts(f.waits())
	f.wait(1, 100e-6)
	f.wait(3, 200e-6)
	f.wait(4, math.Inf(-1))
	mean, n := meanSince(f.waits(), prev)
	if n != 8 || mean != 87500*time.Nanosecond {
		t.Fatalf("mean %v over %d, want 87.5µs over 8", mean, n)
	}
	if mean, n := meanSince(nil, prev); mean != 0 || n != 0 {
		t.Fatalf("no histogram: mean %v over %d", mean, n)
	}
}

// The runtime of this Go has the histogram Run reads.
func TestRuntimeWaits(t *testing.T) {
	h := runtimeWaits()()
	if h == nil || len(h.Buckets) != len(h.Counts)+1 {
		t.Fatalf("/sched/latencies:seconds: %+v", h)
	}
}

// Waits seen while Many is set say nothing, however long: the hold ends on
// time, and neither they nor the window of the switch back count towards
// the next switch, which takes two windows of its own.
func TestWaitsOnManyAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		defer stop()
		f.window(300, 1e-3)
		f.window(300, 1e-3)
		for range DefaultHold / DefaultWindow {
			f.window(300, 1e-3)
		}
		wantSettings(t, f, 1, 2, 1)
		f.window(300, 1e-3)
		wantSettings(t, f, 1, 2, 1)
		f.window(300, 1e-3)
		wantSettings(t, f, 1, 2, 1, 2)
	})
}

// After a retry one queued window alone does not add the processor: the
// count of windows starts again from nothing.
func TestRetryNeedsTwoWindowsOfItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		defer stop()
		f.window(300, 200e-6)
		f.window(300, 200e-6)
		for range DefaultHold / DefaultWindow {
			f.window(300, 10e-6)
		}
		wantSettings(t, f, 1, 2, 1)
		f.window(300, 500e-6)
		f.window(300, 10e-6)
		f.window(300, 500e-6)
		wantSettings(t, f, 1, 2, 1)
	})
}

// The thresholds are inclusive: exactly minWaits waits of exactly Queued
// count as queuing.
func TestThresholdsAreInclusive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRuntime()
		stop := f.start(Options{Few: 1, Many: 2})
		defer stop()
		f.window(minWaits, 100e-6)
		f.window(minWaits, 100e-6)
		wantSettings(t, f, 1, 2)
	})
}
