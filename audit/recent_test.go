package audit

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Recent returns the last lines written, newest first, byte for byte as in the file.
func TestRecentIsTheFilesLastLinesNewestFirst(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, KeepRecent: 3}, nil)
	appendN(t, l, 1, 5)
	lines := readLines(t, l.Path())
	got := l.Recent(0)
	if len(got) != 3 {
		t.Fatalf("kept %d lines, want 3", len(got))
	}
	for i, ln := range got {
		if want := strings.TrimSuffix(lines[len(lines)-1-i], "\n"); string(ln) != want {
			t.Fatalf("line %d:\n%s\nwant\n%s", i, ln, want)
		}
	}
	if two := l.Recent(2); len(two) != 2 || string(two[0]) != string(got[0]) {
		t.Fatalf("Recent(2) = %q", two)
	}
}

// The lines Recent returned stay as they were while later records take
// their slots (each slot reuses its buffer).
func TestRecentLinesAreTheCallers(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, KeepRecent: 2}, nil)
	appendN(t, l, 1, 2)
	held := l.Recent(0)
	was := []string{string(held[0]), string(held[1])}
	appendN(t, l, 3, 4) // every slot taken twice over
	for i, ln := range held {
		if string(ln) != was[i] {
			t.Fatalf("line %d Recent returned changed to\n%s\nfrom\n%s", i, ln, was[i])
		}
	}
	if now := l.Recent(0); string(now[0]) == was[0] || !strings.Contains(string(now[0]), `"seq":6,`) {
		t.Fatalf("Recent after more records: %q", now)
	}
}

func TestRecentOffByDefault(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever}, nil)
	appendN(t, l, 1, 2)
	if got := l.Recent(0); got != nil {
		t.Fatalf("kept %d lines without KeepRecent", len(got))
	}
}

// The byte bound drops the oldest lines first, and a line larger than the bound is not kept at all.
func TestRecentByteBound(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, KeepRecent: 100, KeepRecentBytes: 1000}, nil)
	appendN(t, l, 1, 20) // about 250 bytes a line
	got := l.Recent(0)
	size := 0
	for _, ln := range got {
		size += len(ln)
	}
	if size > 1000 || len(got) < 3 {
		t.Fatalf("kept %d lines, %d bytes; want as many as fit in 1000", len(got), size)
	}
	if r := parseLine(t, string(got[0])); r.Seq != 20 {
		t.Fatalf("newest kept is seq %d, want 20", r.Seq)
	}
	big := rec(21)
	big.Reason = strings.Repeat("x", 2000)
	if err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	if r := parseLine(t, string(l.Recent(1)[0])); r.Seq != 20 {
		t.Fatalf("a line over the bound was kept (newest is seq %d)", r.Seq)
	}
}

// A restart finds the end of its file in Recent: the console's page is not emptied by it.
func TestRecentSeededAtOpen(t *testing.T) {
	path := writeTrail(t, 10)
	l := openTest(t, Options{Path: path, Fsync: FsyncNever, KeepRecent: 4, KeepRecentBytes: 600}, nil)
	got := l.Recent(0)
	if len(got) == 0 {
		t.Fatal("nothing seeded from the file")
	}
	for i, ln := range got {
		if r := parseLine(t, string(ln)); r.Seq != uint64(10-i) {
			t.Fatalf("seeded line %d is seq %d, want %d", i, r.Seq, 10-i)
		}
	}
	appendN(t, l, 11, 1)
	if r := parseLine(t, string(l.Recent(1)[0])); r.Seq != 11 {
		t.Fatalf("newest after an append is seq %d", r.Seq)
	}
}

// What 1,000 kept call lines cost in memory (reported; the console keeps 1,000).
func TestRecentMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := openTest(t, Options{Fsync: FsyncNever, KeepRecent: 1000}, nil)
	for i := range 1000 {
		r := Record{Kind: KindCall, Principal: "alice", Session: "mcp-session-4b1c0e6a", Tool: "orders/refund_order",
			Args: []byte(fmt.Sprintf(`{"order_id":"A-%d","amount":120}`, i)), Decision: DecisionDenied,
			ErrorCode: "approval_required", Stage: "approve", Reason: "/etc/toolgate/policy.csv:31", Attempts: 0, DurationMS: 3,
			PolicyVersion: "3a7bd3e2360a"}
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := 0
	for _, ln := range l.Recent(0) {
		kept += len(ln)
	}
	t.Logf("1,000 call lines kept: %d bytes of lines, heap grew %d bytes", kept, int64(after.HeapAlloc)-int64(before.HeapAlloc))
	if kept > 1000*600 {
		t.Fatalf("a call line averages %d bytes; expected under 600", kept/1000)
	}
}
