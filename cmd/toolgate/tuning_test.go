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

// limitMemory sets the soft limit to the live heap plus the headroom, and
// logs it; with GOMEMLIMIT set it leaves the runtime's own setting alone.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	var logs bytes.Buffer
	t.Setenv("GOMEMLIMIT", "")
	const held = 64 << 20
	limit := limitMemory(slog.New(slog.NewJSONHandler(&logs, nil)), settledHeap(), held)
	if limit < held+memoryHeadroom || limit > held+memoryHeadroom+200<<20 {
		t.Fatalf("limit %d, want what is held (%d) and the headroom (%d) plus the test's live heap (under 40 MiB)",
			limit, held, memoryHeadroom)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("the runtime's limit is %d, want %d", got, limit)
	}
	if !strings.Contains(logs.String(), "soft memory limit set") {
		t.Errorf("nothing logged: %s", logs.String())
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "512MiB")
	if limit := limitMemory(slog.New(slog.DiscardHandler), settledHeap(), 0); limit != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set: limit %d, runtime's %d; want both left alone", limit, debug.SetMemoryLimit(-1))
	}
}

// leaveCPUForUpstreams takes one CPU from Go's share when the gateway runs
// stdio upstreams, and logs it; it leaves the setting alone with GOMAXPROCS
// set, without stdio upstreams, with a large heap, with every audit record
// fsynced, and on one CPU.
func TestLeaveCPUForUpstreams(t *testing.T) {
	t.Cleanup(runtime.SetDefaultGOMAXPROCS) // back to the runtime's own choice, which follows the cgroup again
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
		live       int64
		want, left int // what it returns; the setting after it
	}{
		{"two CPUs, a stdio upstream", "", 2, oneStdio, 1 << 20, 1, 1},
		{"eight CPUs, three stdio upstreams", "", 8, threeStdio, 1 << 20, 7, 7},
		{"just under a large heap", "", 2, oneStdio, largeHeap - 1, 1, 1},
		{"a large heap", "", 2, oneStdio, largeHeap, 0, 2},
		{"no stdio upstream", "", 4, httpOnly, 1 << 20, 0, 4},
		{"every audit record fsynced", "", 2, fsyncAlways, 1 << 20, 0, 2},
		{"fsync always, audit disabled", "", 2, fsyncAlwaysOff, 1 << 20, 1, 1},
		{"one CPU", "", 1, threeStdio, 1 << 20, 0, 1},
		{"GOMAXPROCS set", "2", 2, oneStdio, 1 << 20, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", c.env)
			runtime.GOMAXPROCS(c.procs)
			var logs bytes.Buffer
			got := leaveCPUForUpstreams(slog.New(slog.NewJSONHandler(&logs, nil)), c.cfg, c.live)
			if got != c.want || runtime.GOMAXPROCS(0) != c.left {
				t.Fatalf("returned %d with GOMAXPROCS %d after; want %d and %d", got, runtime.GOMAXPROCS(0), c.want, c.left)
			}
			if logged := strings.Contains(logs.String(), `"gomaxprocs":`); logged != (c.want > 0) {
				t.Errorf("logged %v, want %v: %s", logged, c.want > 0, logs.String())
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
