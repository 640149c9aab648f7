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
		p.runStages(ctx, x, afterDedup)
		return answerOf(x, argsKey, p.now())
	}, func(a Recorded) bool { return a.reached })
	x.finished, x.sharing = true, sharing
	if sharing == dedup.Joined || sharing == dedup.Replayed {
		p.Metrics.DuplicateSuppressed(x.tool.ID, sharing.String())
	}
	switch {
	case sharing == dedup.Executed:
		return nil // x already holds the outcome
	case err != nil:
		return doError(err)
	case a.argsKey != argsKey:
		return envelope.Errorf(envelope.InvalidArguments, "idempotency key %q was already used with different arguments", x.call.IdempotencyKey)
	}
	x.adopt(a, sharing == dedup.Replayed)
	return nil
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
