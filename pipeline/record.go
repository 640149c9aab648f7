package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
)

// AuditTrail is the tamper-evident record of decisions (audit.Log).
type AuditTrail interface {
	Append(audit.Record) error
	Err() error
	FailClosed() bool
}

var _ AuditTrail = (*audit.Log)(nil)

// Recorder writes down every call, whatever happened to it: one log line,
// one audit record, the call metrics. Every field may be nil.
type Recorder struct {
	Log     *slog.Logger
	Audit   AuditTrail
	Metrics *metrics.Metrics
}

// Link is the record link. It wraps the whole chain, so that a call every
// later link refused is recorded as surely as one that ran.
func (r *Recorder) Link() Link {
	if r == nil {
		r = &Recorder{}
	}
	return Link{Name: "record", Outer: true, Wrap: func(ctx context.Context, x *Exchange, next Next) *envelope.Error {
		err := next(ctx, x)
		x.answered()
		d := x.Duration()
		r.logCall(x, d, r.auditCall(x, d))
		r.Metrics.CallFinished(x.MetricTool(), outcomeLabel(x), x.ErrorCode(), d)
		return err
	}}
}

// Gate is the audit link: with audit.fail_closed, it refuses a call before
// it can have any effect while the audit trail cannot be written: a call
// that cannot be recorded does not run. (Without fail_closed the failure
// is reported in the log, the metrics and /readyz, and calls go on.)
func (r *Recorder) Gate() Link {
	if r == nil {
		r = &Recorder{}
	}
	return Step("audit", func(context.Context, *Exchange) *envelope.Error {
		if r.Audit == nil || !r.Audit.FailClosed() {
			return nil
		}
		if err := r.Audit.Err(); err != nil {
			return envelope.Errorf(envelope.InternalError, "the gateway cannot record calls right now, so it runs none; try again later").
				WithDetail("audit trail unavailable (fail_closed): " + err.Error())
		}
		return nil
	})
}

func outcomeLabel(x *Exchange) string {
	if x.Failed != nil {
		return "error"
	}
	return "ok"
}

// logCall writes the one decision line per call: who, what, the outcome
// and why. The why (policy or schema detail) stays in the log, never in
// the client's message.
//
// A call that succeeded and that the audit trail recorded (audited) is
// logged at debug: the trail holds what its line would say (all but the
// client-facing name and the upstream's outcome label), and is the access
// log; the log at info is for what needs an operator, the calls that were
// refused or failed. The success line cost 4% of the gateway's
// CPU a call at 16 callers and 14% at one (and its reader's CPU besides).
// A call the trail did not take (no trail, or its write failed) is logged
// at info, so that every call is written down somewhere.
func (r *Recorder) logCall(x *Exchange, d time.Duration, audited bool) {
	if r.Log == nil {
		return
	}
	level := slog.LevelInfo
	switch {
	case x.Failed == nil && audited:
		level = slog.LevelDebug
	case x.Failed != nil && x.Failed.Code == envelope.InternalError:
		level = slog.LevelError
	}
	if !r.Log.Handler().Enabled(context.Background(), level) {
		return
	}
	var room [16]slog.Attr // the most a line has: no allocation for the list
	attrs := append(room[:0],
		slog.String("principal", x.Call.Subject.Principal),
		slog.String("tool", x.Call.Name),
		slog.Int64("duration_ms", d.Milliseconds()),
	)
	if x.Call.Session != "" {
		attrs = append(attrs, slog.String("session", x.Call.Session))
	}
	if x.Tool != nil {
		attrs = append(attrs, slog.String("id", x.Tool.ID))
	}
	if x.Rule != "" {
		attrs = append(attrs, slog.String("rule", x.Rule))
	}
	if x.Approval != "" {
		attrs = append(attrs, slog.String("approval", x.Approval))
	}
	if x.Sharing != "" && x.Sharing != "executed" {
		attrs = append(attrs, slog.String("dedup", x.Sharing))
	}
	if x.Attempts > 0 {
		attrs = append(attrs, slog.Int("attempts", x.Attempts), slog.String("upstream", x.Outcome.String()))
	}
	if len(x.Redactions) > 0 {
		attrs = append(attrs, slog.Any("redactions", map[string]int(x.Redactions)))
	}
	if x.Failed == nil {
		attrs = append(attrs, slog.String("outcome", "ok"))
	} else {
		attrs = append(attrs, slog.String("outcome", "error"), slog.String("error_code", string(x.Failed.Code)),
			slog.String("stage", x.Stage))
		if x.Failed.Detail != "" {
			attrs = append(attrs, slog.String("reason", x.Failed.Detail))
		}
	}
	r.writeLine(level, "tools/call", attrs)
}

// writeLine hands the line to the logger's handler itself: Logger.LogAttrs
// would also walk the stack for the caller's PC (runtime.Callers, 16% of
// logCall's CPU samples), which no handler of ours prints. The caller has
// checked that level is enabled.
func (r *Recorder) writeLine(level slog.Level, msg string, attrs []slog.Attr) {
	rec := slog.NewRecord(time.Now(), level, msg, 0)
	rec.AddAttrs(attrs...)
	_ = r.Log.Handler().Handle(context.Background(), rec) // as Logger does: a line that cannot be written is not the call's failure
}

// auditCall appends the call's record: who, what (canonical tool and the
// digest of the arguments), what was decided and why.
// auditCall appends the call's audit record and reports whether it was
// written.
func (r *Recorder) auditCall(x *Exchange, d time.Duration) bool {
	if r.Audit == nil {
		return false
	}
	rec := audit.Record{
		Time: x.Started, Kind: audit.KindCall, Principal: x.Call.Subject.Principal, Session: x.Call.Session,
		Tool: auditTool(x), Args: auditArgs(x.Call.Args), Decision: decision(x), ErrorCode: x.ErrorCode(),
		Attempts: x.Attempts, DurationMS: d.Milliseconds(), Reason: x.Rule, PolicyVersion: x.Policy.Version(),
		Shadow: x.Shadow,
	}
	if canonical, err := x.CanonicalArgs(); err == nil {
		sum := sha256.Sum256(canonical) // as audit.Digest would: computed once per call
		rec.ArgsDigest = "sha256:" + hex.EncodeToString(sum[:])
	}
	if x.Failed != nil {
		rec.Stage = x.Stage
		if x.Failed.Detail != "" {
			rec.Reason = x.Failed.Detail
		}
	}
	if x.Tool == nil {
		rec.Details = map[string]any{"requested": x.Call.Name}
	}
	if x.Approval != "" || (x.Sharing != "" && x.Sharing != "executed") {
		rec.Details = map[string]any{"approval": x.Approval}
		if x.Sharing != "" { // duplicate suppression applied to the call
			rec.Details["dedup"] = x.Sharing
		}
	}
	if len(x.Redactions) > 0 { // what was redacted, never the text
		if rec.Details == nil {
			rec.Details = map[string]any{}
		}
		rec.Details["redactions"] = x.Redactions.Clone()
	}
	err := r.Audit.Append(rec)
	if err != nil && r.Log != nil {
		r.Log.Error("audit record not written", "tool", rec.Tool, "principal", rec.Principal, "err", err)
	}
	return err == nil
}

// auditTool is the canonical tool, or "" when the name resolved to nothing
// (the requested name is then in Details).
func auditTool(x *Exchange) string {
	if x.Tool == nil {
		return ""
	}
	return x.Tool.ID
}

// auditArgs are the arguments as received ({} when there were none).
func auditArgs(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// decision names what the gateway decided about the call.
func decision(x *Exchange) audit.Decision {
	if x.Failed == nil {
		return audit.DecisionAllowed
	}
	switch x.Failed.Code {
	case envelope.ApprovalRequired:
		return audit.DecisionApprovalRequired
	case envelope.ToolNotFound, envelope.ToolNotAllowed, envelope.InvalidArguments, envelope.ApprovalDenied,
		envelope.ToolChanged, envelope.RateLimited, envelope.InsufficientScope:
		return audit.DecisionDenied
	}
	return audit.DecisionFailed
}
