// Package testkit holds the few helpers the end-to-end tests of several
// packages share: a log sink safe for concurrent writers, with waits for
// what goroutines log, and a look at this machine's processes to prove no
// upstream child outlives its owner.
// It is imported only by tests.
package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogBuffer is a log sink safe for concurrent writers.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records returns the JSON log records (slog's JSON handler) whose msg is
// msg.
func (b *LogBuffer) Records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Await waits until msg has been logged n times and returns those
// records; it fails t after 30 s. A log line is the only sign some
// goroutines give that they are ready (a file watch in place, a status
// reported).
func (b *LogBuffer) Await(t testing.TB, msg string, n int) []map[string]any {
	t.Helper()
	var recs []map[string]any
	b.await(t, fmt.Sprintf("%q logged %d times", msg, n), func(string) bool {
		recs = b.Records(msg)
		return len(recs) >= n
	})
	return recs
}

// AwaitText waits until the log contains every one of texts (a log in
// any format); it fails t after 30 s.
func (b *LogBuffer) AwaitText(t testing.TB, texts ...string) {
	t.Helper()
	b.await(t, fmt.Sprintf("all of %q in the log", texts), func(log string) bool {
		return !slices.ContainsFunc(texts, func(s string) bool { return !strings.Contains(log, s) })
	})
}

// await looks at the log every 5 ms until ok holds, for 30 s at most.
func (b *LogBuffer) await(t testing.TB, what string, ok func(log string) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(b.String()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s; the log:\n%s", what, b)
		}
	}
}

// ChildPIDs lists the direct children of pid, running or not yet reaped,
// from /proc. Any thread may have started them, so the per-task children
// files are not enough.
func ChildPIDs(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return nil, fmt.Errorf("no /proc: %v", err)
	}
	var pids []int
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		rest := string(raw[bytes.LastIndexByte(raw, ')')+1:])
		var state string
		var child, ppid int
		fmt.Sscan(string(raw), &child)
		if _, err := fmt.Sscan(rest, &state, &ppid); err == nil && ppid == pid {
			pids = append(pids, child)
		}
	}
	return pids, nil
}
