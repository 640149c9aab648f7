package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// describe is notes as "p<progress>" and "l<data>", in order.
func describe(notes []pipeline.Note) []string {
	var out []string
	for _, n := range notes {
		if n.Progress != nil {
			out = append(out, fmt.Sprintf("p%g", n.Progress.Progress))
			continue
		}
		var m struct{ Data string }
		_ = json.Unmarshal(n.Log, &m)
		out = append(out, "l"+m.Data)
	}
	return out
}

func logLine(data string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"level":"info","data":%q}`, data))
}

// A call's notifications are recorded once RecordNotes was called, in their
// order, within the bounds: the last MaxNoteProgress progress
// notifications, the first MaxNoteLogs log messages within MaxNoteLogBytes.
func TestCallNotes(t *testing.T) {
	pipeline.NoteLog(context.Background(), logLine("no record")) // nothing to note on: no panic
	ctx := pipeline.WithInteraction(context.Background())
	pipeline.NoteLog(ctx, logLine("before"))
	pipeline.NoteProgress(ctx, upstreams.Progress{Progress: 0})
	if n := pipeline.Notes(ctx); n != nil {
		t.Fatalf("noted before RecordNotes: %q", describe(n))
	}
	pipeline.RecordNotes(ctx)
	pipeline.NoteProgress(ctx, upstreams.Progress{Progress: 1})
	pipeline.NoteLog(ctx, logLine("a"))
	pipeline.NoteProgress(ctx, upstreams.Progress{Progress: 2})
	pipeline.NoteLog(ctx, logLine("b"))
	if got, want := describe(pipeline.Notes(ctx)), []string{"p1", "la", "p2", "lb"}; !slices.Equal(got, want) {
		t.Fatalf("notes %q, want %q", got, want)
	}
	// Past the bounds.
	for i := 3; i <= 200; i++ {
		pipeline.NoteProgress(ctx, upstreams.Progress{Progress: float64(i)})
		pipeline.NoteLog(ctx, logLine(fmt.Sprint(i)))
	}
	got := describe(pipeline.Notes(ctx))
	var progress, logs []string
	for _, d := range got {
		if d[0] == 'p' {
			progress = append(progress, d)
		} else {
			logs = append(logs, d)
		}
	}
	if len(progress) != pipeline.MaxNoteProgress || progress[0] != fmt.Sprintf("p%d", 200-pipeline.MaxNoteProgress+1) || progress[len(progress)-1] != "p200" {
		t.Errorf("%d progress notes kept, from %s to %s; want the last %d", len(progress), progress[0], progress[len(progress)-1], pipeline.MaxNoteProgress)
	}
	if len(logs) != pipeline.MaxNoteLogs || logs[0] != "la" || logs[2] != "l3" || logs[len(logs)-1] != fmt.Sprintf("l%d", pipeline.MaxNoteLogs) {
		t.Errorf("%d log notes kept, %q...; want the first %d", len(logs), logs[:3], pipeline.MaxNoteLogs)
	}
	// In order: every kept log message was noted before every kept
	// progress notification.
	if !slices.Equal(got, append(slices.Clone(logs), progress...)) {
		t.Errorf("notes out of order: %q", got)
	}
	// The byte bound: a message that does not fit is dropped, and all
	// after it, so the kept ones are what the client saw first.
	ctx = pipeline.WithInteraction(context.Background())
	pipeline.RecordNotes(ctx)
	half := strings.Repeat("x", pipeline.MaxNoteLogBytes/2)
	for _, d := range []string{"1" + half, "2" + half, "small"} {
		pipeline.NoteLog(ctx, logLine(d))
	}
	if got := pipeline.Notes(ctx); len(got) != 1 || !strings.HasPrefix(describe(got)[0], "l1x") {
		t.Errorf("%d log notes kept, want the first only", len(got))
	}
}
