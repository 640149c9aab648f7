package upstreams

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/redact/redacttest"
)

// A stderr line longer than maxStderrLine is logged up to its last
// separator within the limit and the rest dropped: a key straddling the
// limit reaches neither the log nor the tail, not even in part, where
// logging the line in 4 KiB pieces used to hand out both halves, which no
// pattern matches. A key on a line of its own is redacted as usual, and a
// long line without a separator is logged as its mark alone.
func TestLongStderrLinesAreCutBeforeTheLimit(t *testing.T) {
	r, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := redacttest.Samples()[2].Secret // an AWS access key, 20 characters
	straddling := strings.Repeat("a", maxStderrLine-10) + " " + key + " and more\n"
	input := straddling + "next " + key + "\n" + strings.Repeat("b", 3*maxStderrLine) + "\nlast"
	var logs bytes.Buffer
	tail := &tailRing{}
	logLines(io.NopCloser(strings.NewReader(input)), slog.New(slog.NewTextHandler(&logs, nil)), tail, r.Lines())

	got := tail.lines()
	want := []string{
		strings.Repeat("a", maxStderrLine-10) + longLineMark,
		"next [redacted:aws_access_key]",
		strings.TrimPrefix(longLineMark, " "),
		"last",
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines kept, want %d: %.200q", len(got), len(want), got)
	}
	for i := range want {
		// The tail clips each line; the log has them whole.
		if !strings.HasPrefix(want[i], strings.TrimSuffix(got[i], "…")) && got[i] != want[i] {
			t.Errorf("line %d kept as %.120q, want %.120q", i, got[i], want[i])
		}
		if !strings.Contains(logs.String(), want[i]) {
			t.Errorf("line %d not logged as %.120q", i, want[i])
		}
	}
	if half := key[:len(key)/2]; strings.Contains(logs.String(), half) || strings.Contains(strings.Join(got, "\n"), half) {
		t.Errorf("part of the key (%s) reached the log or the tail:\n%.300s", half, logs.String())
	}
}
