package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/envelope"
)

// Dedup is duplicate suppression: the same principal calling the same tool
// with the same canonical arguments (or the same idempotency key) while an
// identical call is in flight joins it, and within Window after it
// finished gets its recorded answer again, marked replayed, instead of a
// second execution. A nil *Dedup suppresses nothing.
type Dedup struct {
	Table *dedup.Table[Recorded]
	// Window is how long a finished call's answer is replayed for an
	// identical call (0: calls in flight are still joined).
	Window time.Duration
	// KeyWindow is the same for a client idempotency key (_meta
	// "io.toolgate/idempotency-key"); it is meant to be longer.
	KeyWindow time.Duration
	// RetrySafeToo also deduplicates retry-safe tools, which are otherwise
	// left alone: repeating them is harmless by definition.
	RetrySafeToo bool
	// Shared, when not nil, is the level several replicas share
	// (state.Dedup over Redis): the call Table lets run on this replica
	// claims it there too, so an identical call on another replica is
	// joined or replayed as well. Nil: this replica alone (the default).
	Shared dedup.Shared
	// SharedFailOpen runs a call with this replica's suppression only
	// while Shared fails (its store unreachable), instead of refusing it
	// (state.dedup_on_failure).
	SharedFailOpen bool

	encode func(Recorded) ([]byte, error) // encodeRecorded; tests make it fail
}

// Recorded is what an executed call leaves for the calls that join or
// repeat it (exported only so a Table can be built outside the package;
// its fields are private).
type Recorded struct {
	result   *mcp.CallToolResult
	failed   *envelope.Error
	stage    string
	outcome  breaker.Outcome
	reached  bool      // the upstream may have seen the call: only then is it recorded
	argsKey  dedup.Key // to refuse an idempotency key reused with other arguments
	finished time.Time
	// remote is how the shared level settled the call when another
	// replica's call answered it (0: it ran here). Such an answer is not
	// recorded in the local table: the shared one holds it, with its own
	// window.
	remote dedup.Sharing
}

// deduplicate runs the rest of the pipeline at most once per identical
// call (see Dedup). It ends the exchange: the stages after it run inside.
func (p *Pipeline) deduplicate(ctx context.Context, x *exchange) *envelope.Error {
	x.safe = p.Resilience.retrySafe(x.tool)
	d := p.Dedup
	if d == nil || d.Table == nil || (x.safe && !d.RetrySafeToo) {
		return nil
	}
	argsKey, key, window, err := d.keys(x)
	if err != nil {
		return nil // arguments the canonicaliser refuses are not suppressed (validation already passed them)
	}
	a, sharing, err := d.Table.Do(ctx, key, window, func(ctx context.Context) Recorded {
		if d.Shared != nil {
			return p.runShared(ctx, x, key, window, argsKey)
		}
		p.runStages(ctx, x, afterDedup)
		return answerOf(x, argsKey, p.now())
	}, func(a Recorded) bool { return a.reached && a.remote == 0 })
	ranHere := sharing == dedup.Executed // then x already holds the outcome
	if ranHere && a.remote != 0 {
		sharing = a.remote // answered by an identical call on another replica
	}
	x.finished, x.sharing = true, sharing
	if sharing == dedup.Joined || sharing == dedup.Replayed {
		p.Metrics.DuplicateSuppressed(x.tool.ID, sharing.String())
	}
	switch {
	case ranHere:
		return nil
	case err != nil:
		return doError(err)
	case a.argsKey != argsKey:
		return envelope.Errorf(envelope.InvalidArguments, "idempotency key %q was already used with different arguments", x.call.IdempotencyKey)
	}
	x.adopt(a, sharing == dedup.Replayed)
	return nil
}

// sharedDownWait is the retry hint while the shared store cannot be
// reached: about as long as its health check takes to notice it is back.
const sharedDownWait = time.Second

// runShared runs the call as the shared level settles it (Dedup.Shared):
// here, under a lease that other replicas' identical calls wait on, or not
// at all, taking an identical call's answer from another replica. Its
// result is what this replica's own joiners get.
func (p *Pipeline) runShared(ctx context.Context, x *exchange, key dedup.Key, window time.Duration, argsKey dedup.Key) Recorded {
	claim, err := p.claimShared(ctx, key, window)
	var recovering *dedup.RecoveringError
	switch {
	case err == nil && claim.Lease != nil:
		settled := false
		defer func() {
			if !settled { // a panic outside the stages: never leave the lease renewing
				p.settle(ctx, x, claim.Lease, Recorded{failed: outcomeUnknown("the gateway failed while handling it"),
					outcome: x.outcome, reached: x.attempts > 0, argsKey: argsKey, finished: p.now()})
			}
		}()
		p.runStages(ctx, x, afterDedup)
		a := answerOf(x, argsKey, p.now())
		p.settle(ctx, x, claim.Lease, a)
		settled = true
		return a
	case err == nil:
		a, derr := decodeRecorded(claim.Answer)
		switch {
		case derr != nil:
			x.stage, x.failed = "deduplicate", envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
				WithDetail("recorded answer of an identical call unreadable: "+derr.Error())
		case a.argsKey != argsKey:
			x.stage, x.failed = "deduplicate", envelope.Errorf(envelope.InvalidArguments, "idempotency key %q was already used with different arguments", x.call.IdempotencyKey)
		default:
			x.adopt(a, claim.Sharing == dedup.Replayed)
			a.remote = claim.Sharing
			return a
		}
	case errors.Is(err, dedup.ErrAbandoned):
		x.stage, x.failed = "deduplicate", envelope.Errorf(envelope.UpstreamError,
			"an identical call was running on another gateway replica that stopped before it recorded the outcome; "+
				"the outcome is unknown, so this call was not run").WithDetail(err.Error())
	case errors.As(err, &recovering) && !p.Dedup.SharedFailOpen:
		x.stage, x.failed = "deduplicate", envelope.Errorf(envelope.RateLimited,
			"duplicate suppression is paused because the shared state store lost its data and is recovering, so the call was not run; retry in %s",
			max(recovering.Left.Round(100*time.Millisecond), 100*time.Millisecond)).WithDetail("shared duplicate suppression: "+err.Error())
	case ctx.Err() != nil:
		x.stage, x.failed = "deduplicate", doError(err)
	case p.Dedup.SharedFailOpen:
		if p.Log != nil {
			p.Log.Warn("shared duplicate suppression unavailable; call suppressed on this replica only", "tool", x.tool.ID, "err", err)
		}
		p.runStages(ctx, x, afterDedup)
		return answerOf(x, argsKey, p.now())
	default:
		// rate_limited is the one retryable code that means "refused for
		// now, before it ran; back off and retry" (rate limits answer it
		// when they fail closed too). upstream_unavailable would blame a
		// healthy upstream, and internal_error is not retryable.
		x.stage, x.failed = "deduplicate", envelope.Errorf(envelope.RateLimited,
			"duplicate suppression cannot be checked because the shared state store is unavailable, so the call was not run; retry in %s",
			sharedDownWait).WithDetail("shared duplicate suppression: "+err.Error())
	}
	return answerOf(x, argsKey, p.now())
}

// claimShared is Shared.Claim, waiting out the quiet lease of a store that
// lost its data (dedup.ErrRecovering) rather than refusing the call at
// once: within it, the identical call's marker may come back (it is then
// joined), and on a new store no call is running anyway. It gives up, with
// the recovering error, when the caller's context would end first; with
// SharedFailOpen it does not wait at all (the call then runs as when the
// store is down).
func (p *Pipeline) claimShared(ctx context.Context, key dedup.Key, window time.Duration) (dedup.Claim, error) {
	for {
		claim, err := p.Dedup.Shared.Claim(ctx, key, window)
		var re *dedup.RecoveringError
		if !errors.As(err, &re) || p.Dedup.SharedFailOpen {
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
// reached the upstream, else the lease is released so an identical call may
// run. It happens even when the caller has gone. A failure is logged only:
// the caller has its answer, and the store's marker runs out into "outcome
// unknown", never into a second execution. An answer that cannot be
// encoded is recorded as "outcome unknown": the lease is never released
// for a call that may have run.
func (p *Pipeline) settle(ctx context.Context, x *exchange, l dedup.Lease, a Recorded) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if a.reached {
		encode := encodeRecorded
		if p.Dedup.encode != nil {
			encode = p.Dedup.encode
		}
		data, encErr := encode(a)
		if encErr != nil {
			if p.Log != nil {
				p.Log.Warn("shared duplicate suppression: the answer cannot be recorded; identical calls are told the outcome is unknown", "tool", x.tool.ID, "err", encErr)
			}
			// An empty answer if even this fails: identical calls then get
			// internal_error, still never a second execution.
			data, _ = encodeRecorded(Recorded{failed: outcomeUnknown("its answer could not be recorded"),
				stage: a.stage, outcome: a.outcome, argsKey: a.argsKey, finished: a.finished})
		}
		err = l.Done(ctx, data)
	} else {
		err = l.Release(ctx)
	}
	if err != nil && p.Log != nil {
		p.Log.Warn("shared duplicate suppression: the call's outcome was not recorded", "tool", x.tool.ID, "err", err)
	}
}

// recordedJSON is a Recorded as the shared store keeps it.
type recordedJSON struct {
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *recordedError  `json:"error,omitempty"`
	Stage    string          `json:"stage,omitempty"`
	Outcome  breaker.Outcome `json:"outcome"`
	ArgsKey  string          `json:"args_key"`
	Finished time.Time       `json:"finished"`
}

type recordedError struct {
	Code    envelope.Code `json:"code"`
	Message string        `json:"message"`
	Detail  string        `json:"detail,omitempty"`
}

func encodeRecorded(a Recorded) ([]byte, error) {
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
	return json.Marshal(r)
}

// decodeRecorded reads an answer another replica recorded. The result's
// structured content is kept as the exact bytes it carried.
func decodeRecorded(data []byte) (Recorded, error) {
	var r recordedJSON
	if err := json.Unmarshal(data, &r); err != nil {
		return Recorded{}, err
	}
	argsKey, err := dedup.ParseKey(r.ArgsKey)
	if err != nil {
		return Recorded{}, err
	}
	a := Recorded{stage: r.Stage, outcome: r.Outcome, reached: true, argsKey: argsKey, finished: r.Finished}
	if len(r.Result) > 0 {
		var res mcp.CallToolResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return Recorded{}, err
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
		return Recorded{}, errors.New("neither a result nor an error")
	}
	return a, nil
}

func (d *Dedup) keys(x *exchange) (argsKey, key dedup.Key, window time.Duration, err error) {
	canonical, err := x.canonicalArgs()
	if err != nil {
		return argsKey, key, 0, err
	}
	argsKey = dedup.ArgsKey(x.call.Subject.Principal, x.tool.ID, canonical)
	if x.call.IdempotencyKey != "" {
		return argsKey, dedup.IdempotencyKey(x.call.Subject.Principal, x.tool.ID, x.call.IdempotencyKey), d.KeyWindow, nil
	}
	return argsKey, argsKey, d.Window, nil
}

func answerOf(x *exchange, argsKey dedup.Key, now time.Time) Recorded {
	return Recorded{
		result: freshResult(x.answer), failed: x.failed, stage: x.stage, outcome: x.outcome,
		reached: x.attempts > 0 && x.outcome != breaker.NeverSent,
		argsKey: argsKey, finished: now,
	}
}

// adopt takes another call's outcome as this call's, on a result of its
// own: mcp-go stamps metadata onto the result it sends, so a result is
// never handed to two callers.
func (x *exchange) adopt(a Recorded, replayed bool) {
	x.answer, x.failed, x.stage, x.outcome = freshResult(a.result), a.failed, a.stage, a.outcome
	x.replayed = replayed
	if replayed && x.answer != nil {
		markReplayed(x.answer)
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
	raw, ok := res.StructuredContent.(json.RawMessage)
	var env envelope.Envelope
	if !ok || json.Unmarshal(raw, &env) != nil {
		return
	}
	env.Replayed = true
	res.StructuredContent = mustJSON(env)
}

func doError(err error) *envelope.Error {
	var pe *dedup.PanicError
	if errors.As(err, &pe) {
		return envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").WithDetail("panic in a joined call")
	}
	return envelope.Errorf(envelope.UpstreamError, "the call was cancelled while an identical call was running; its outcome is unknown").WithDetail(err.Error())
}
