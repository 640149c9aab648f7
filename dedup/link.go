package dedup

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// Options configure duplicate suppression (limits.dedup); zero values work.
type Options struct {
	// MaxEntries bounds the calls this replica remembers (default 10000).
	MaxEntries int
	// MaxBytes bounds the bytes of the answers it keeps for replay
	// (default 16 MiB); an answer over a quarter of it is joined while in
	// flight but not kept whole, nor is one pushed out by newer ones: what
	// is left says the call ran, and its repeat within the window is
	// refused with duplicate_call (see Table.LimitBytes, withheld).
	MaxBytes int64
	// Window is how long a finished call's answer is replayed for an
	// identical call (0: calls in flight are still joined).
	Window time.Duration
	// KeyWindow is the same for a client idempotency key (_meta
	// "io.toolgate/idempotency-key"); it is meant to be longer.
	KeyWindow time.Duration
	// RetrySafeToo also deduplicates retry-safe tools, which are otherwise
	// left alone: repeating them is harmless by definition.
	RetrySafeToo bool
	// Shared, when not nil, is the level several replicas share (the Redis
	// store, dedup/redisstore): the call this replica lets run claims it
	// there too, so an identical call on another replica is joined or
	// replayed as well. Nil: this replica alone (the default). The store
	// keeps answers whole: a repeat of one this replica did not keep
	// (MaxBytes) is replayed from there (repeatNotKept).
	Shared Shared
	// SharedFailOpen runs a call with this replica's suppression only
	// while Shared fails (its store unreachable), instead of refusing it
	// (state.dedup_on_failure).
	SharedFailOpen bool
	Metrics        *metrics.Metrics // counts suppressed calls; nil counts nothing
	Log            *slog.Logger
	Now            func() time.Time // time.Now when nil
}

// Guard is duplicate suppression: the same principal calling the same tool
// with the same canonical arguments (or the same idempotency key) while an
// identical call is in flight joins it, and within Window after it
// finished gets its recorded answer again, marked replayed, instead of a
// second execution (or, when MaxBytes took that answer, duplicate_call:
// never a second execution). A nil *Guard suppresses nothing.
type Guard struct {
	Options
	table  *Table[recorded]
	encode func(recorded) ([]byte, error) // encodeRecorded; tests make it fail
}

// The bounds when Options.MaxEntries and MaxBytes are 0.
const (
	defaultMaxEntries       = 10000
	defaultMaxBytes   int64 = 16 << 20
)

// NewGuard builds duplicate suppression with its own table.
func NewGuard(o Options) *Guard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = defaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	table := NewTable[recorded](o.MaxEntries, o.Now)
	table.LimitBytes(o.MaxBytes, recordedBytes, func(r recorded) bool { return r.keyed }, withheld)
	return &Guard{Options: o, table: table, encode: encodeRecorded}
}

// recordedBytes is about what a kept answer holds in memory: its strings,
// blobs and structured content, and for every block and note what holding
// it costs besides (a block of an empty text still takes ~100 bytes once
// decoded, so 40,000 of them in a 1 MiB result hold 1.3 MB).
func recordedBytes(r recorded) int64 {
	if r.bytes > 0 {
		return r.bytes
	}
	const overhead, perBlock, perNote = 512, 128, 96
	n := int64(overhead)
	if r.result != nil {
		n += resultBytes(r.result) + perBlock*int64(len(r.result.Content))
	}
	for _, note := range r.notes {
		n += perNote + int64(len(note.Log))
		if note.Progress != nil {
			n += int64(len(note.Progress.Message))
		}
	}
	return n
}

// resultBytes sums the sizes of a result's strings: content of every kind
// and structured content.
func resultBytes(res *mcp.CallToolResult) int64 {
	var n int64
	for _, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			n += int64(len(c.Text))
		case mcp.ImageContent:
			n += int64(len(c.Data) + len(c.MIMEType))
		case mcp.AudioContent:
			n += int64(len(c.Data) + len(c.MIMEType))
		case mcp.ResourceLink:
			n += int64(len(c.URI) + len(c.Name) + len(c.Title) + len(c.Description) + len(c.MIMEType))
		case mcp.EmbeddedResource:
			switch r := c.Resource.(type) {
			case mcp.TextResourceContents:
				n += int64(len(r.URI) + len(r.MIMEType) + len(r.Text))
			case mcp.BlobResourceContents:
				n += int64(len(r.URI) + len(r.MIMEType) + len(r.Blob))
			}
		default: // a kind this list does not know: its encoding is about its size
			if b, err := json.Marshal(c); err == nil {
				n += int64(len(b))
			}
		}
	}
	if raw, _ := envelope.RawOf(res.StructuredContent); raw != nil {
		n += int64(len(raw))
	} else if res.StructuredContent != nil { // a kind the chain does not make: its encoding is about its size
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			n += int64(len(b))
		}
	}
	return n
}

// recorded is what an executed call leaves for the calls that join or
// repeat it.
type recorded struct {
	result   *mcp.CallToolResult
	failed   *envelope.Error
	stage    string
	outcome  breaker.Outcome
	reached  bool // the upstream may have seen the call: only then is it recorded
	argsKey  Key  // to refuse an idempotency key reused with other arguments
	finished time.Time
	// interactive: the upstream asked the caller's client something during
	// the call (pipeline.Interacted); see shareable.
	interactive bool
	keyed       bool // the call named its operation with an idempotency key
	// notes are the log and progress notifications the upstream sent the
	// caller's client during the call (pipeline.Notes, bounded there): a
	// call that joins or replays this one is sent them before its answer.
	notes []pipeline.Note
	// remote is how the shared level settled the call when another
	// replica's call answered it (0: it ran here). Such an answer is not
	// recorded in the local table: the shared one holds it, with its own
	// window.
	remote Sharing
	// notKept: the bytes bound (limits.dedup.max_bytes) took the answer
	// and notes; what is left says the call ran, so that its repeat is
	// refused with duplicate_call instead of running a second time.
	notKept bool
	// bytes is recordedBytes(this), counted once by answerOf (0: not yet):
	// the log's size check and the table's bound both need it.
	bytes int64
}

// withheld is what the table keeps of an answer the bytes bound takes:
// everything but the result and the notes. A failure keeps its result
// (the envelope of a message capped at 1,000 bytes) and is replayed as
// usual, without its notes.
func withheld(a recorded) recorded {
	a.notes, a.bytes = nil, 0
	if a.failed == nil {
		a.result, a.notKept = nil, true
	}
	return a
}

// repeatNotKept answers a repeat of a call whose answer the bytes bound
// took: a retry-safe call (include_retry_safe) runs again, as repeating it
// is harmless; with the shared store, the answer is replayed from there,
// where it is kept whole; otherwise, or when the store cannot give it, the
// call is refused with duplicate_call rather than run a second time.
func (g *Guard) repeatNotKept(ctx context.Context, x *pipeline.Exchange, next pipeline.Next, key Key, window time.Duration, a recorded) *envelope.Error {
	if x.RetrySafe {
		return x.Pass(next)
	}
	if g.Shared != nil && g.replayShared(ctx, x, key, window, a.argsKey) {
		return x.Failed
	}
	x.Sharing = "refused"
	g.Metrics.DuplicateSuppressed(x.Tool.ID, "refused")
	return envelope.Errorf(envelope.DuplicateCall,
		"an identical call ran at %s, within the last %s; its answer was not kept for replay (too large, or pushed out by newer answers), "+
			"so this call was not run again. To run it again on purpose, send a new idempotency key",
		a.finished.UTC().Format(time.RFC3339), window)
}

// replayShared takes the answer of a call that ran here from the shared
// store, and reports whether it could. It never runs the call: a lease (the
// store lost or let go of the answer) is released, as is every failure of
// the store, and the caller refuses the repeat.
func (g *Guard) replayShared(ctx context.Context, x *pipeline.Exchange, key Key, window time.Duration, argsKey Key) bool {
	claim, err := g.Shared.Claim(ctx, key, window)
	if err != nil {
		return false
	}
	if claim.Lease != nil {
		_ = claim.Lease.Release(ctx)
		return false
	}
	a, err := decodeRecorded(claim.Answer)
	if err != nil || a.argsKey != argsKey {
		return false
	}
	x.Sharing = claim.Sharing.String()
	g.Metrics.DuplicateSuppressed(x.Tool.ID, x.Sharing)
	adopt(ctx, x, a, claim.Sharing == Replayed)
	return true
}

// Link is duplicate suppression's place in the chain: right before
// execute, after approvals. It runs the rest of the chain at most once per
// identical call.
func (g *Guard) Link() pipeline.Link { return pipeline.Link{Name: "deduplicate", Wrap: g.deduplicate} }

// deduplicate runs the rest of the chain at most once per identical call.
func (g *Guard) deduplicate(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
	if g == nil || (x.RetrySafe && !g.RetrySafeToo) {
		return x.Pass(next)
	}
	argsKey, key, window, err := g.keys(ctx, x)
	if err != nil {
		return x.Pass(next) // arguments the canonicaliser refuses are not suppressed (validation already passed them)
	}
	a, sharing, err := g.do(ctx, x, next, key, window, argsKey)
	if err == nil && sharing == Replayed && a.notKept && a.argsKey == argsKey {
		return g.repeatNotKept(ctx, x, next, key, window, a)
	}
	ranHere := sharing == Executed // then x already holds the outcome
	if ranHere && a.remote != 0 {
		sharing = a.remote // answered by an identical call on another replica
	}
	if sharing != 0 {
		x.Sharing = sharing.String()
	}
	if sharing == Joined || sharing == Replayed {
		g.Metrics.DuplicateSuppressed(x.Tool.ID, sharing.String())
	}
	switch {
	case ranHere:
		return x.Failed
	case err != nil:
		return doError(err)
	case a.argsKey != argsKey:
		return envelope.Errorf(envelope.InvalidArguments, "idempotency key %q was already used with different arguments", x.Call.IdempotencyKey)
	}
	adopt(ctx, x, a, sharing == Replayed)
	return x.Failed
}

// do runs the rest of the chain through the table: at most once per
// identical call. A call that joined one whose answer is not shareable (it
// carries what another caller's client said) runs on its own, beside it
// rather than after it.
func (g *Guard) do(ctx context.Context, x *pipeline.Exchange, next pipeline.Next, key Key, window time.Duration, argsKey Key) (recorded, Sharing, error) {
	a, sharing, err := g.table.DoLeaving(ctx, key, window, leaveWhenAsked(ctx, x), func(ctx context.Context) recorded {
		if g.Shared != nil {
			return g.runShared(ctx, x, next, key, window, argsKey)
		}
		run(ctx, x, next)
		return answerOf(ctx, x, argsKey, g.Now())
	}, func(a recorded) bool {
		if !a.reached || a.remote != 0 || !a.shareable() {
			return false
		}
		g.noteTooLarge(x, a, window)
		return true
	})
	if sharing == Joined && (errors.Is(err, ErrLeft) || (err == nil && !a.shareable())) {
		next(ctx, x)
		return answerOf(ctx, x, argsKey, g.Now()), Executed, nil
	}
	return a, sharing, err
}

// noteTooLarge says in the log when an answer is too large to keep whole
// for replay (over a quarter of MaxBytes, as Table.LimitBytes decides): an
// identical call within the window is refused with duplicate_call. Not
// with the shared store, which keeps it whole and replays it; nor for a
// failure, which is kept (see withheld).
func (g *Guard) noteTooLarge(x *pipeline.Exchange, a recorded, window time.Duration) {
	if g.Log == nil || window <= 0 || g.Shared != nil || a.failed != nil {
		return
	}
	size := recordedBytes(a)
	if size <= g.MaxBytes/4 {
		return
	}
	level := slog.LevelInfo
	if a.keyed { // the client named the operation: its retry with the key will not get this answer
		level = slog.LevelWarn
	}
	g.Log.Log(context.Background(), level, "answer too large to keep for replay: an identical call within the window is refused with duplicate_call",
		"tool", x.Tool.ID, "principal", x.Call.Subject.Principal, "bytes", size, "limit", g.MaxBytes/4,
		"idempotency_key", a.keyed)
}

// leaveWhenAsked is the channel that lets calls joining this one stop
// waiting: closed when the upstream asks this call's client something, if
// that makes its answer unshareable (no idempotency key: see shareable), so
// an identical call does not wait out a call parked for its client's input.
func leaveWhenAsked(ctx context.Context, x *pipeline.Exchange) <-chan struct{} {
	if x.Call.IdempotencyKey != "" {
		return nil
	}
	return pipeline.Asked(ctx)
}

// shareable reports whether another request may be given this answer. One
// of a call during which the upstream asked its client something (sampling,
// elicitation, roots) depends on what that client said, so it is not
// shared: an identical call runs and asks its own client. Except when the
// answer carries nothing the client said and sharing is what prevents a
// second execution: an unknown outcome (the tool may have run; the
// failure's text is the gateway's), or a call under an idempotency key
// (the client named the operation itself: a retry with the key is the same
// operation).
func (a recorded) shareable() bool {
	if !a.interactive || a.keyed {
		return true
	}
	return a.failed != nil && (a.failed.Code == envelope.UpstreamError || a.failed.Code == envelope.ToolTimeout)
}

// sharedDownWait is the retry hint while the shared store cannot be
// reached: about as long as its health check takes to notice it is back.
const sharedDownWait = time.Second

// runShared runs the call as the shared level settles it (Options.Shared):
// here, under a lease that other replicas' identical calls wait on, or not
// at all, taking an identical call's answer from another replica. Its
// result is what this replica's own joiners get.
func (g *Guard) runShared(ctx context.Context, x *pipeline.Exchange, next pipeline.Next, key Key, window time.Duration, argsKey Key) recorded {
	claim, err := g.claimShared(ctx, key, window)
	var recovering *RecoveringError
	switch {
	case err == nil && claim.Lease != nil:
		settled := false
		defer func() {
			if !settled { // a panic outside the stages: never leave the lease renewing
				g.settle(ctx, x, claim.Lease, recorded{failed: outcomeUnknown("the gateway failed while handling it"),
					outcome: x.Outcome, reached: x.Attempts > 0, argsKey: argsKey, finished: g.Now()})
			}
		}()
		run(ctx, x, next)
		a := answerOf(ctx, x, argsKey, g.Now())
		g.settle(ctx, x, claim.Lease, a)
		settled = true
		return a
	case err == nil:
		a, derr := decodeRecorded(claim.Answer)
		switch {
		case derr != nil:
			x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
				WithDetail("recorded answer of an identical call unreadable: "+derr.Error())
		case a.argsKey != argsKey:
			x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.InvalidArguments, "idempotency key %q was already used with different arguments", x.Call.IdempotencyKey)
		default:
			adopt(ctx, x, a, claim.Sharing == Replayed)
			a.remote = claim.Sharing
			return a
		}
	case errors.Is(err, ErrWaitInterrupted) && errors.Is(err, ErrAbandoned):
		x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.UpstreamError,
			"an identical call was running on another gateway replica and the shared state store could not be reached for longer than that call's lease; "+
				"the outcome is unknown, so this call was not run").WithDetail(err.Error())
	case errors.Is(err, ErrAbandoned):
		x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.UpstreamError,
			"an identical call was running on another gateway replica that stopped before it recorded the outcome; "+
				"the outcome is unknown, so this call was not run").WithDetail(err.Error())
	case errors.As(err, &recovering) && !g.SharedFailOpen:
		x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.RateLimited,
			"duplicate suppression is paused because the shared state store lost its data and is recovering, so the call was not run; retry in %s",
			max(recovering.Left.Round(100*time.Millisecond), 100*time.Millisecond)).WithDetail("shared duplicate suppression: "+err.Error())
	case ctx.Err() != nil:
		x.Stage, x.Failed = "deduplicate", doError(err)
	case errors.Is(err, ErrWaitInterrupted):
		// Before SharedFailOpen: failing open would run a call known to be
		// running elsewhere, the duplicate this link exists to stop.
		x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.RateLimited,
			"an identical call is running on another gateway replica and the shared state store failed while this call waited for its answer, so it was not run; retry in %s",
			sharedDownWait).WithDetail("shared duplicate suppression: "+err.Error())
	case g.SharedFailOpen:
		if g.Log != nil {
			g.Log.Warn("shared duplicate suppression unavailable; call suppressed on this replica only", "tool", x.Tool.ID, "err", err)
		}
		run(ctx, x, next)
		return answerOf(ctx, x, argsKey, g.Now())
	default:
		// rate_limited is the one retryable code that means "refused for
		// now, before it ran; back off and retry" (rate limits answer it
		// when they fail closed too). upstream_unavailable would blame a
		// healthy upstream, and internal_error is not retryable.
		x.Stage, x.Failed = "deduplicate", envelope.Errorf(envelope.RateLimited,
			"duplicate suppression cannot be checked because the shared state store is unavailable, so the call was not run; retry in %s",
			sharedDownWait).WithDetail("shared duplicate suppression: "+err.Error())
	}
	return answerOf(ctx, x, argsKey, g.Now())
}

// claimShared is Shared.Claim, waiting out the quiet lease of a store that
// lost its data (dedup.ErrRecovering) rather than refusing the call at
// once: within it, the identical call's marker may come back (it is then
// joined), and on a new store no call is running anyway. It gives up, with
// the recovering error, when the caller's context would end first; with
// SharedFailOpen it does not wait at all (the call then runs as when the
// store is down).
func (g *Guard) claimShared(ctx context.Context, key Key, window time.Duration) (Claim, error) {
	for {
		claim, err := g.Shared.Claim(ctx, key, window)
		var re *RecoveringError
		if !errors.As(err, &re) || g.SharedFailOpen {
			return claim, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= re.Left {
			return claim, err
		}
		t := time.NewTimer(min(re.Left, recoveringRecheck))
		select {
		case <-ctx.Done():
			t.Stop()
			return claim, err
		case <-t.C:
		}
	}
}

// recoveringRecheck is how often claimShared looks again while it waits
// out a recovering store: how soon a marker that came back is joined.
const recoveringRecheck = 250 * time.Millisecond

// outcomeUnknown is the answer recorded for a call that may have reached
// the upstream when its real answer cannot be: identical calls are told
// the outcome is unknown, never given the call to run again.
func outcomeUnknown(why string) *envelope.Error {
	return envelope.Errorf(envelope.UpstreamError,
		"an identical call may have reached the tool, but %s before its answer was recorded; the outcome is unknown, so this call was not run", why)
}

// settle ends the lease: the answer is recorded when the call may have
// reached the upstream, else, or when the answer is not shareable (it
// carries what the caller's client said), the lease is released so an
// identical call may run. It happens even when the caller has gone. A failure is logged only:
// the caller has its answer, and the store's marker runs out into "outcome
// unknown", never into a second execution. An answer that cannot be
// encoded is recorded as "outcome unknown": the lease is never released
// for a call that may have run.
func (g *Guard) settle(ctx context.Context, x *pipeline.Exchange, l Lease, a recorded) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if a.reached && a.shareable() {
		data, encErr := g.encode(a)
		if encErr != nil {
			if g.Log != nil {
				g.Log.Warn("shared duplicate suppression: the answer cannot be recorded; identical calls are told the outcome is unknown", "tool", x.Tool.ID, "err", encErr)
			}
			// An empty answer if even this fails: identical calls then get
			// internal_error, still never a second execution.
			data, _ = encodeRecorded(recorded{failed: outcomeUnknown("its answer could not be recorded"),
				stage: a.stage, outcome: a.outcome, argsKey: a.argsKey, finished: a.finished})
		}
		err = l.Done(ctx, data)
	} else {
		err = l.Release(ctx)
	}
	if err != nil && g.Log != nil {
		g.Log.Warn("shared duplicate suppression: the call's outcome was not recorded", "tool", x.Tool.ID, "err", err)
	}
}

// recordedJSON is a recorded answer as the shared store keeps it.
type recordedJSON struct {
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *recordedError  `json:"error,omitempty"`
	Stage    string          `json:"stage,omitempty"`
	Outcome  breaker.Outcome `json:"outcome"`
	ArgsKey  string          `json:"args_key"`
	Finished time.Time       `json:"finished"`
	Notes    []recordedNote  `json:"notes,omitempty"` // in order; a replica that predates them ignores them
}

// recordedNote is one pipeline.Note: a log message's params, or progress.
type recordedNote struct {
	Log      json.RawMessage   `json:"log,omitempty"`
	Progress *recordedProgress `json:"progress,omitempty"`
}

type recordedProgress struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// maxRecordedNotes bounds the notes read from the shared store, as
// pipeline.Notes bounds those recorded.
const maxRecordedNotes = pipeline.MaxNoteLogs + pipeline.MaxNoteProgress

type recordedError struct {
	Code    envelope.Code `json:"code"`
	Message string        `json:"message"`
	Detail  string        `json:"detail,omitempty"`
}

func encodeRecorded(a recorded) ([]byte, error) {
	r := recordedJSON{Stage: a.stage, Outcome: a.outcome, ArgsKey: a.argsKey.String(), Finished: a.finished}
	if a.result != nil {
		res, err := json.Marshal(freshResult(a.result))
		if err != nil {
			return nil, err
		}
		r.Result = res
	}
	if a.failed != nil {
		r.Error = &recordedError{Code: a.failed.Code, Message: a.failed.Message, Detail: a.failed.Detail}
	}
	for _, n := range a.notes {
		switch {
		case n.Progress != nil:
			r.Notes = append(r.Notes, recordedNote{Progress: &recordedProgress{n.Progress.Progress, n.Progress.Total, n.Progress.Message}})
		case n.Log != nil:
			r.Notes = append(r.Notes, recordedNote{Log: n.Log})
		}
	}
	return json.Marshal(r)
}

// decodeRecorded reads an answer another replica recorded. The result's
// structured content is kept as the exact bytes it carried.
func decodeRecorded(data []byte) (recorded, error) {
	var r recordedJSON
	if err := json.Unmarshal(data, &r); err != nil {
		return recorded{}, err
	}
	argsKey, err := ParseKey(r.ArgsKey)
	if err != nil {
		return recorded{}, err
	}
	a := recorded{stage: r.Stage, outcome: r.Outcome, reached: true, argsKey: argsKey, finished: r.Finished}
	if len(r.Result) > 0 {
		var res mcp.CallToolResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return recorded{}, err
		}
		if len(res.RawStructuredContent) > 0 {
			res.StructuredContent, res.RawStructuredContent = json.RawMessage(res.RawStructuredContent), nil
		}
		a.result = &res
	}
	if r.Error != nil {
		a.failed = &envelope.Error{Code: r.Error.Code, Message: r.Error.Message, Detail: r.Error.Detail}
	}
	if a.result == nil && a.failed == nil {
		return recorded{}, errors.New("neither a result nor an error")
	}
	for _, n := range r.Notes[:min(len(r.Notes), maxRecordedNotes)] {
		switch {
		case n.Progress != nil:
			a.notes = append(a.notes, pipeline.Note{Progress: &upstreams.Progress{Progress: n.Progress.Progress, Total: n.Progress.Total, Message: n.Progress.Message}})
		case len(n.Log) > 0:
			a.notes = append(a.notes, pipeline.Note{Log: n.Log})
		}
	}
	return a, nil
}

// keys are the call's arguments key (to refuse an idempotency key reused
// with other arguments) and the key it is suppressed under: its
// idempotency key when it has one (the client named the operation; a retry
// under the key is the same operation whatever its client declares), else
// its arguments with what its client declared it can answer (ArgsKeyFor).
func (g *Guard) keys(ctx context.Context, x *pipeline.Exchange) (argsKey, key Key, window time.Duration, err error) {
	canonical, err := x.CanonicalArgs()
	if err != nil {
		return argsKey, key, 0, err
	}
	argsKey = ArgsKey(x.Call.Subject.Principal, x.Tool.ID, canonical)
	if x.Call.IdempotencyKey != "" {
		return argsKey, IdempotencyKey(x.Call.Subject.Principal, x.Tool.ID, x.Call.IdempotencyKey), g.KeyWindow, nil
	}
	if declared := upstreams.CapabilityDigest(ctx); declared != "" {
		return argsKey, ArgsKeyFor(x.Call.Subject.Principal, x.Tool.ID, declared, canonical), g.Window, nil
	}
	return argsKey, argsKey, g.Window, nil // ArgsKeyFor without capabilities is ArgsKey: not hashed twice
}

// run runs the rest of the chain for the call whose answer identical calls
// will share, recording the notifications its client is sent meanwhile:
// log messages the relay notes on ctx, and progress, which passes through
// x.Call.Progress (wrapped for the call, and put back after it). A caller
// that asked for no progress gets none, and none is recorded.
func run(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) {
	pipeline.RecordNotes(ctx)
	if progress := x.Call.Progress; progress != nil {
		x.Call.Progress = func(p upstreams.Progress) {
			pipeline.NoteProgress(ctx, p)
			progress(p)
		}
		defer func() { x.Call.Progress = progress }()
	}
	next(ctx, x)
}

func answerOf(ctx context.Context, x *pipeline.Exchange, argsKey Key, now time.Time) recorded {
	a := recorded{
		result: freshResult(x.Answer), failed: x.Failed, stage: x.Stage, outcome: x.Outcome,
		reached:     x.Attempts > 0 && x.Outcome != breaker.NeverSent,
		interactive: pipeline.Interacted(ctx), keyed: x.Call.IdempotencyKey != "",
		argsKey: argsKey, finished: now,
	}
	// An interactive call's notifications may echo what its client said;
	// they go to another caller only when the call was named by the same
	// client's idempotency key (see shareable), not with a shared unknown
	// outcome.
	if !a.interactive || a.keyed {
		a.notes = pipeline.Notes(ctx)
	}
	a.bytes = recordedBytes(a)
	return a
}

// adopt takes another call's outcome as this call's, on a result of its
// own: mcp-go stamps metadata onto the result it sends, so a result is
// never handed to two callers. The notifications that call's client was
// sent are sent to this call's first (resend).
func adopt(ctx context.Context, x *pipeline.Exchange, a recorded, replayed bool) {
	x.Answer, x.Failed, x.Stage, x.Outcome = freshResult(a.result), a.failed, a.stage, a.outcome
	x.Replayed = replayed
	if replayed && x.Answer != nil {
		markReplayed(x.Answer)
	}
	resend(ctx, x, a.notes)
}

// resend sends this call's client the notifications an identical call's
// client was sent, in their order, before this call's answer: progress
// under this call's own progress token (x.Call.Progress; none when it
// asked for none), log messages through this call's relay, which sends
// them at this client's own log level.
func resend(ctx context.Context, x *pipeline.Exchange, notes []pipeline.Note) {
	relay := upstreams.RelayFrom(ctx)
	for _, n := range notes {
		switch {
		case n.Progress != nil && x.Call.Progress != nil:
			x.Call.Progress(*n.Progress)
		case n.Log != nil && relay != nil:
			relay.Log(n.Log)
		}
	}
}

// freshResult copies a result without the metadata mcp-go adds when it
// sends one. The content blocks and the envelope bytes are never modified,
// so they are shared.
func freshResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	c := *res
	c.Result = mcp.Result{}
	c.Content = append([]mcp.Content(nil), res.Content...)
	return &c
}

// markReplayed sets replayed: true in a result's envelope.
func markReplayed(res *mcp.CallToolResult) {
	raw, _ := envelope.RawOf(res.StructuredContent)
	var env envelope.Envelope
	if raw == nil || json.Unmarshal(raw, &env) != nil {
		return
	}
	env.Replayed = true
	res.StructuredContent = envelope.Encode(env)
}

func doError(err error) *envelope.Error {
	var pe *PanicError
	if errors.As(err, &pe) {
		return envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").WithDetail("panic in a joined call")
	}
	return envelope.Errorf(envelope.UpstreamError, "the call was cancelled while an identical call was running; its outcome is unknown").WithDetail(err.Error())
}
