package pipeline

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/upstreams"
)

// A call during which the upstream asked the caller's client something
// (sampling, elicitation, roots) is not a pure function of its arguments:
// its answer depends on what that client said, so it belongs to that caller
// alone and is never shared with another request (duplicate suppression
// neither replays it nor hands it to a joined call). The relay that carries
// the question notes it on the call's context; guards read it.
//
// The same per-call record keeps, once a guard asks for it (RecordNotes),
// the log and progress notifications the upstream sent the caller's client
// during the call, so that duplicate suppression can send them again to a
// call that joins or replays it.

type interactionKey struct{}

// callNotes is what is noted about one client call.
type callNotes struct {
	interacted atomic.Bool
	asked      chan struct{} // closed by the first NoteInteraction
	askedOnce  sync.Once
	recording  atomic.Bool

	mu       sync.Mutex
	seq      int      // notes seen while recording, in order
	logs     []seqLog // the first MaxNoteLogs, within MaxNoteLogBytes
	logBytes int
	progress []seqProgress // ring: the last MaxNoteProgress; made by the first
	nProg    int           // progress notes seen
}

type seqLog struct {
	seq    int
	params json.RawMessage
}

type seqProgress struct {
	seq int
	p   upstreams.Progress
}

// Bounds of the notifications recorded for one call (RecordNotes).
const (
	// MaxNoteLogs log messages are kept: the first ones. Each stands on
	// its own, and keeping the first costs nothing once full.
	MaxNoteLogs = 64
	// MaxNoteLogBytes bounds the kept log messages' params together; a
	// message that would exceed it is dropped, as are all after it.
	MaxNoteLogBytes = 64 << 10
	// MaxNoteProgress progress notifications are kept: the last ones.
	// Progress only grows and each supersedes the one before, so the last
	// ones end where the call ended (its final value, total and message).
	MaxNoteProgress = 64
)

// Note is one notification an upstream sent the caller's client during a
// call: a log message (the params of notifications/message, sanitised) or
// progress. Exactly one of Log and Progress is set.
type Note struct {
	Log      json.RawMessage
	Progress *upstreams.Progress
}

// WithInteraction returns ctx able to note an interaction (see
// NoteInteraction) and, once recording, notifications (NoteLog,
// NoteProgress). The transport calls it once per client call, before it
// binds the relay to ctx.
func WithInteraction(ctx context.Context) context.Context {
	return context.WithValue(ctx, interactionKey{}, &callNotes{asked: make(chan struct{})})
}

func notesOf(ctx context.Context) *callNotes {
	n, _ := ctx.Value(interactionKey{}).(*callNotes)
	return n
}

// NoteInteraction records that the upstream asked the client of ctx's call
// something, whatever the client answered. Without WithInteraction it does
// nothing.
func NoteInteraction(ctx context.Context) {
	if n := notesOf(ctx); n != nil {
		n.interacted.Store(true)
		n.askedOnce.Do(func() { close(n.asked) })
	}
}

// Asked is closed once the upstream asked the client of ctx's call
// something (NoteInteraction); nil, which never closes, without
// WithInteraction. A call waiting on this one's answer can stop waiting
// then: the answer will be this caller's alone.
func Asked(ctx context.Context) <-chan struct{} {
	if n := notesOf(ctx); n != nil {
		return n.asked
	}
	return nil
}

// Interacted reports whether NoteInteraction was called for ctx's call.
func Interacted(ctx context.Context) bool {
	n := notesOf(ctx)
	return n != nil && n.interacted.Load()
}

// RecordNotes starts recording ctx's call's notifications (NoteLog,
// NoteProgress) for Notes; until then, and without WithInteraction, they
// are not kept. Duplicate suppression calls it for the call it runs.
func RecordNotes(ctx context.Context) {
	if n := notesOf(ctx); n != nil {
		n.recording.Store(true)
	}
}

// NoteLog records one log message (the params of notifications/message)
// the upstream sent the client of ctx's call, within the bounds above. The
// relay calls it for every message, whatever the client's log level: a
// call that gets it again is sent it at its own client's level.
func NoteLog(ctx context.Context, params json.RawMessage) {
	n := notesOf(ctx)
	if n == nil || !n.recording.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	if len(n.logs) >= MaxNoteLogs || n.logBytes+len(params) > MaxNoteLogBytes {
		n.logBytes = MaxNoteLogBytes // nothing after a dropped message: the kept ones are a prefix
		return
	}
	n.logBytes += len(params)
	n.logs = append(n.logs, seqLog{n.seq, append(json.RawMessage(nil), params...)})
}

// NoteProgress records one progress notification the client of ctx's call
// was sent, within the bounds above.
func NoteProgress(ctx context.Context, p upstreams.Progress) {
	n := notesOf(ctx)
	if n == nil || !n.recording.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	if n.progress == nil {
		// Made when needed: a call object with the ring inside was 3.5 KB,
		// the largest allocation of a call that sends no progress (most).
		n.progress = make([]seqProgress, MaxNoteProgress)
	}
	n.progress[n.nProg%MaxNoteProgress] = seqProgress{n.seq, p}
	n.nProg++
}

// Notes is what was recorded of ctx's call's notifications, in the order
// they were noted: at most MaxNoteLogs log messages and MaxNoteProgress
// progress notifications.
func Notes(ctx context.Context) []Note {
	n := notesOf(ctx)
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	kept := min(n.nProg, MaxNoteProgress)
	if len(n.logs)+kept == 0 {
		return nil
	}
	out := make([]Note, 0, len(n.logs)+kept)
	logs, first := n.logs, n.nProg-kept // the oldest kept progress note is number first
	for i := range kept {
		sp := n.progress[(first+i)%MaxNoteProgress]
		for len(logs) > 0 && logs[0].seq < sp.seq {
			out = append(out, Note{Log: logs[0].params})
			logs = logs[1:]
		}
		p := sp.p
		out = append(out, Note{Progress: &p})
	}
	for _, l := range logs {
		out = append(out, Note{Log: l.params})
	}
	return out
}
