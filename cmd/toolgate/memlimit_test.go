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
	const held = 64 << 20
	limit := limitMemory(slog.New(slog.NewJSONHandler(&logs, nil)), held)
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
	if limit := limitMemory(slog.New(slog.DiscardHandler), 0); limit != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set: limit %d, runtime's %d; want both left alone", limit, debug.SetMemoryLimit(-1))
	}
}
