package proxy

import (
	"context"
	"log/slog"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/envelope"
)

// record writes the one decision line per call: who, what, the outcome and
// why. The why (policy or schema detail) stays in the log, never in the
// client's message.
func (p *Pipeline) record(x *exchange) {
	if p.Log == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("principal", x.call.Subject.Principal),
		slog.String("tool", x.call.Name),
		slog.Int64("duration_ms", x.duration().Milliseconds()),
	}
	if x.call.Session != "" {
		attrs = append(attrs, slog.String("session", x.call.Session))
	}
	if x.tool != nil {
		attrs = append(attrs, slog.String("id", x.tool.ID))
	}
	if x.rule != "" {
		attrs = append(attrs, slog.String("rule", x.rule))
	}
	if x.approval != "" {
		attrs = append(attrs, slog.String("approval", x.approval))
	}
	if x.sharing != 0 && x.sharing != dedup.Executed {
		attrs = append(attrs, slog.String("dedup", x.sharing.String()))
	}
	if x.attempts > 0 {
		attrs = append(attrs, slog.Int("attempts", x.attempts), slog.String("upstream", x.outcome.String()))
	}
	level := slog.LevelInfo
	if x.failed == nil {
		attrs = append(attrs, slog.String("outcome", "ok"))
	} else {
		attrs = append(attrs, slog.String("outcome", "error"), slog.String("error_code", string(x.failed.Code)),
			slog.String("stage", x.stage))
		if x.failed.Detail != "" {
			attrs = append(attrs, slog.String("reason", x.failed.Detail))
		}
		if x.failed.Code == envelope.InternalError {
			level = slog.LevelError
		}
	}
	p.Log.LogAttrs(context.Background(), level, "tools/call", attrs...)
}
