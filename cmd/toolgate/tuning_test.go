package main

import (
	"bytes"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
)

// limitMemory sets the soft limit to the live heap, plus what is held,
// plus the larger of the headroom and four times the heap, and logs it;
// with GOMEMLIMIT set it leaves the runtime's own setting alone.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	const held = 64 << 20
	for _, c := range []struct {
		live, want int64
	}{
		{1 << 20, 1<<20 + held + memoryHeadroom}, // a small config: the headroom
		{100 << 20, 100<<20 + held + 400<<20},    // a large one: gcPercent's growth
	} {
		var logs bytes.Buffer
		limit := limitMemory(slog.New(slog.NewJSONHandler(&logs, nil)), c.live, held)
		if limit != c.want {
			t.Fatalf("live %d: limit %d, want %d", c.live, limit, c.want)
		}
		if got := debug.SetMemoryLimit(-1); got != limit {
			t.Fatalf("the runtime's limit is %d, want %d", got, limit)
		}
		if !strings.Contains(logs.String(), "soft memory limit set") {
			t.Errorf("nothing logged: %s", logs.String())
		}
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "512MiB")
	if limit := limitMemory(slog.New(slog.DiscardHandler), 1<<20, 0); limit != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set: limit %d, runtime's %d; want both left alone", limit, debug.SetMemoryLimit(-1))
	}
}

// leaveCPUForUpstreams takes one CPU from Go's share when the gateway runs
// stdio upstreams, and logs it; it leaves the setting alone with GOMAXPROCS
// set, without stdio upstreams, and on one CPU; it declines, saying why,
// with every audit record fsynced and with a stdin read blocking.
func TestLeaveCPUForUpstreams(t *testing.T) {
	before := runtime.GOMAXPROCS(0) // what go test -cpu or GOMAXPROCS gave the test binary
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	stdio := &config.Server{Transport: config.TransportStdio}
	oneStdio := &config.Config{Servers: map[string]*config.Server{"a": stdio}}
	threeStdio := &config.Config{Servers: map[string]*config.Server{"a": stdio, "b": stdio, "c": stdio}}
	httpOnly := &config.Config{Servers: map[string]*config.Server{"a": {Transport: config.TransportHTTP}}}
	fsyncAlways := &config.Config{Servers: oneStdio.Servers, Audit: config.Audit{Fsync: config.AuditFsyncAlways}}
	fsyncAlwaysOff := &config.Config{Servers: oneStdio.Servers, Audit: config.Audit{Fsync: config.AuditFsyncAlways, Disabled: true}}
	cases := []struct {
		name       string
		env        string
		procs      int // GOMAXPROCS before the call
		cfg        *config.Config
		blocking   bool // stdin is read blocking
		want, left int  // what it returns; the setting after it
		why        string
	}{
		{"two CPUs, a stdio upstream", "", 2, oneStdio, false, 1, 1, ""},
		{"eight CPUs, three stdio upstreams", "", 8, threeStdio, false, 7, 7, ""},
		{"every audit record fsynced", "", 2, fsyncAlways, false, 0, 2, "audit.fsync: always"},
		{"fsync always, audit disabled", "", 2, fsyncAlwaysOff, false, 1, 1, ""},
		{"stdin read blocking", "", 2, oneStdio, true, 0, 2, "stdin is read blocking"},
		{"no stdio upstream", "", 4, httpOnly, false, 0, 4, ""},
		{"one CPU", "", 1, threeStdio, false, 0, 1, ""},
		{"GOMAXPROCS set", "2", 2, oneStdio, false, 0, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", c.env)
			runtime.GOMAXPROCS(c.procs)
			var logs bytes.Buffer
			got := leaveCPUForUpstreams(slog.New(slog.NewJSONHandler(&logs, nil)), c.cfg, c.blocking)
			if got != c.want || runtime.GOMAXPROCS(0) != c.left {
				t.Fatalf("returned %d with GOMAXPROCS %d after; want %d and %d", got, runtime.GOMAXPROCS(0), c.want, c.left)
			}
			if fewer := strings.Contains(logs.String(), "one CPU fewer"); fewer != (c.want > 0) {
				t.Errorf("logged one CPU fewer: %v, want %v: %s", fewer, c.want > 0, logs.String())
			}
			if c.why != "" && !strings.Contains(logs.String(), c.why) {
				t.Errorf("declined without saying %q: %s", c.why, logs.String())
			}
			if c.why == "" && strings.Contains(logs.String(), "keeping every CPU") {
				t.Errorf("declined where it had no reason to say: %s", logs.String())
			}
		})
	}
}

// stdioUpstreams counts the enabled servers started as child processes,
// not the http ones nor the disabled.
func TestStdioUpstreams(t *testing.T) {
	c := &config.Config{Servers: map[string]*config.Server{
		"a": {Transport: config.TransportStdio},
		"b": {Transport: config.TransportStdio, Disabled: true},
		"c": {Transport: config.TransportHTTP},
		"d": {Transport: config.TransportStdio},
	}}
	if n := stdioUpstreams(c); n != 2 {
		t.Fatalf("stdioUpstreams = %d, want 2", n)
	}
}

// settledHeap reports the heap the test binary keeps live: more than
// nothing, far less than a gigabyte.
func TestSettledHeap(t *testing.T) {
	if live := settledHeap(); live <= 0 || live > 1<<30 {
		t.Fatalf("settledHeap = %d", live)
	}
}
