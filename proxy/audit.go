package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/envelope"
)

// auditable refuses a call, before it can have any effect, while the audit
// trail cannot be written and the operator chose audit.fail_closed: a call
// that cannot be recorded does not run. (Without fail_closed the failure is
// reported in the log, the metrics and /readyz, and calls go on.)
func (p *Pipeline) auditable(_ context.Context, _ *exchange) *envelope.Error {
	if p.Audit == nil || !p.Audit.FailClosed() {
		return nil
	}
	if err := p.Audit.Err(); err != nil {
		return envelope.Errorf(envelope.InternalError, "the gateway cannot record calls right now, so it runs none; try again later").
			WithDetail("audit trail unavailable (fail_closed): " + err.Error())
	}
	return nil
}

// auditCall appends the call's record: who, what (canonical tool and the
// digest of the arguments), what was decided and why.
func (p *Pipeline) auditCall(x *exchange) {
	if p.Audit == nil {
		return
	}
	r := audit.Record{
		Time: x.started, Kind: audit.KindCall, Principal: x.call.Subject.Principal, Session: x.call.Session,
		Tool: auditTool(x), Args: auditArgs(x.call.Args), Decision: decision(x), ErrorCode: x.errorCode(),
		Attempts: x.attempts, DurationMS: x.duration().Milliseconds(), Reason: x.rule,
	}
	if canonical, err := x.canonicalArgs(); err == nil {
		sum := sha256.Sum256(canonical) // as audit.Digest would: computed once per call
		r.ArgsDigest = "sha256:" + hex.EncodeToString(sum[:])
	}
	if pv, ok := x.policy.(interface{ Version() string }); ok {
		r.PolicyVersion = pv.Version()
	}
	if x.failed != nil && x.failed.Detail != "" {
		r.Reason = x.failed.Detail
	}
	if x.tool == nil {
		r.Details = map[string]any{"requested": x.call.Name}
	}
	if x.approval != "" || (x.sharing != 0 && x.sharing != dedup.Executed) {
		r.Details = map[string]any{"approval": x.approval, "dedup": x.sharing.String()}
	}
	if err := p.Audit.Append(r); err != nil && p.Log != nil {
		p.Log.Error("audit record not written", "tool", r.Tool, "principal", r.Principal, "err", err)
	}
}

// auditTool is the canonical tool, or "" when the name resolved to nothing
// (the requested name is then in Details).
func auditTool(x *exchange) string {
	if x.tool == nil {
		return ""
	}
	return x.tool.ID
}

// auditArgs are the arguments as received ({} when there were none).
func auditArgs(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// decision names what the gateway decided about the call.
func decision(x *exchange) audit.Decision {
	if x.failed == nil {
		return audit.DecisionAllowed
	}
	switch x.failed.Code {
	case envelope.ApprovalRequired:
		return audit.DecisionApprovalRequired
	case envelope.ToolNotFound, envelope.ToolNotAllowed, envelope.InvalidArguments, envelope.ApprovalDenied,
		envelope.ToolChanged, envelope.RateLimited:
		return audit.DecisionDenied
	}
	return audit.DecisionFailed
}
