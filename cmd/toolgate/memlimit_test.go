package main

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// limitMemory sets the soft limit to the live heap plus the headroom, and
// logs it; with GOMEMLIMIT set it leaves the runtime's own setting alone.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	var logs bytes.Buffer
	t.Setenv("GOMEMLIMIT", "")
	limit := limitMemory(slog.New(slog.NewJSONHandler(&logs, nil)))
	if limit < memoryHeadroom || limit > memoryHeadroom+1<<30 {
		t.Fatalf("limit %d, want the headroom (%d) plus a live heap under 1 GiB", limit, memoryHeadroom)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("the runtime's limit is %d, want %d", got, limit)
	}
	if !strings.Contains(logs.String(), "soft memory limit set") {
		t.Errorf("nothing logged: %s", logs.String())
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "512MiB")
	if limit := limitMemory(slog.New(slog.DiscardHandler)); limit != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set: limit %d, runtime's %d; want both left alone", limit, debug.SetMemoryLimit(-1))
	}
}
