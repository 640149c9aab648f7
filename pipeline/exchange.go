package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/canonjson"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/toolsets"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// Call is one inbound tools/call as the client sent it. Links read it; what
// goes upstream is built fresh from it (execute). Two links change it, each
// for a reason of its own: validate replaces Args with the final arguments
// (a tool override's fixed values injected), so everything after it sees
// what the upstream gets; and deduplicate wraps Progress while the call
// runs, to record what a replay re-sends, and puts it back.
type Call struct {
	Subject authz.Subject
	Session string
	Name    string          // the tool name the client asked for
	Args    json.RawMessage // the exact argument bytes
	// Progress receives the upstream's progress for this call; nil when
	// the client asked for none (no progress token).
	Progress func(upstreams.Progress)
	// IdempotencyKey is the client's _meta "io.toolgate/idempotency-key",
	// or "" (then identical arguments identify a duplicate).
	IdempotencyKey string
	// TraceMeta is the client's request _meta, where W3C trace context
	// (traceparent, tracestate) may be; read only by tracing.
	TraceMeta map[string]any
	// Toolset is the toolset the request was given (package toolsets);
	// nil: none, every tool. resolve answers tool_not_found for a tool
	// outside it.
	Toolset *toolsets.Set
	// Refused is set by the transport when it could not read the call
	// (the discovery call meta-tool's arguments); resolve answers it, so
	// the call is recorded as any refused call is.
	Refused *envelope.Error
}

// Exchange is what the links learn about one call. Each field says which
// link sets it; a link reads only what the links before it set.
type Exchange struct {
	Call    Call
	Started time.Time
	// Policy is the one policy snapshot every link of this call is decided
	// by, even when a reload lands while the call runs.
	Policy Policy

	Tool *upstreams.Tool // resolve
	// RetrySafe (resolve) says the tool may be repeated after an unknown
	// outcome: it decides retries, and retryable for tool_timeout and
	// upstream_error.
	RetrySafe bool
	Rule      string // conditions: the policy line that allowed the call (file:line), when known
	Approval  string // approve: the approval request this call used up, if any
	// Shadow (shadow, package authz/shadow) is the shadow policy's decision,
	// set only when it disagrees with the live policy's; the record link
	// writes it on the call's audit record. It never changes the call.
	Shadow *audit.Shadow

	Raw      json.RawMessage     // execute: the upstream's raw result
	Outcome  breaker.Outcome     // execute: how the last upstream attempt ended
	Attempts int                 // execute: upstream attempts made
	Answer   *mcp.CallToolResult // normalize: the answer on success
	// Redactions (execute, normalize) are the secrets replaced in what the
	// upstream sent, per pattern; the record link counts them on the audit
	// record. nil: none.
	Redactions redact.Counts

	// Stage is the link that stopped the call, and Failed why. The chain
	// sets them from the first link that returns an error, unless a link
	// has set them itself (an answer adopted from an identical call).
	Stage  string
	Failed *envelope.Error

	// Sharing is how duplicate suppression settled the call: "executed",
	// "joined", "replayed" or "refused" (duplicate_call); "" when it did
	// not apply.
	Sharing  string
	Replayed bool // the answer is a recorded one from an earlier call

	canonical    []byte // the arguments' canonical JSON, once computed
	canonicalErr error

	pos       int             // the next link to run
	mark      time.Time       // the last clock reading of the chain
	inner     time.Duration   // the time the link that just returned took, nested links included
	ended     time.Time       // when Duration was first read
	outer     context.Context // the context of the wrapping link running, without its span (Pass)
	outerSpan trace.Span      // that link's span, nil for the record link
}

// Pass hands the call on without wrapping it. A wrapping link that finds
// nothing to do for this call (no approval needed, a tool duplicate
// suppression leaves alone) calls it instead of next, so that the rest of
// the chain runs beside the link in traces, not inside it.
// The link's span ends at the hand-over: passing took no more than that.
func (x *Exchange) Pass(next Next) *envelope.Error {
	if x.outerSpan != nil {
		tracing.End(x.outerSpan, "")
	}
	return next(x.outer, x)
}

// CanonicalArgs is the canonical JSON of the arguments ({} when none),
// computed once per call: approvals, duplicate suppression and the audit
// trail all identify the call by it.
func (x *Exchange) CanonicalArgs() ([]byte, error) {
	if x.canonical == nil && x.canonicalErr == nil {
		args := x.Call.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		x.canonical, x.canonicalErr = canonjson.Canonical(args)
	}
	return x.canonical, x.canonicalErr
}

// Duration is the call's duration as the chain measured it: from the start
// to the end of the last link that finished when it is first read. The
// record link reads it once the links inside it returned, so logs, audit
// and metrics agree on one figure.
func (x *Exchange) Duration() time.Duration {
	if x.ended.IsZero() {
		x.ended = x.mark
	}
	return x.ended.Sub(x.Started)
}

// SentNothing reports whether this call provably sent nothing upstream: it
// made no attempt (refused before execute's attempts, or answered by an
// identical call), or every attempt it made was refused before sending.
// Outcome is the last attempt's; an earlier attempt that was sent is
// followed by another only for a retry-safe tool, so for one of those only
// a single attempt proves it.
func (x *Exchange) SentNothing() bool {
	return x.Attempts == 0 || (x.Outcome == breaker.NeverSent && (x.Attempts == 1 || !x.RetrySafe))
}

// MetricTool is the call's tool as metrics label it: the canonical ID,
// never the client's string (unbounded label values).
func (x *Exchange) MetricTool() string {
	if x.Tool == nil || x.Tool.Guessed {
		return metrics.Unresolved
	}
	return x.Tool.ID
}

// ErrorCode is the failure's code, or "" on success.
func (x *Exchange) ErrorCode() string {
	if x.Failed != nil {
		return string(x.Failed.Code)
	}
	return ""
}

// Result is the client's answer: the envelope of the failure, or the
// answer normalize built.
func (x *Exchange) Result() *mcp.CallToolResult {
	x.answered()
	if x.Failed != nil {
		return FailureResult(x.Failed, x.RetrySafe, x.Replayed)
	}
	return x.Answer
}

// answered makes sure the call has an outcome: a chain whose links all
// passed without any of them answering (a bug in a link) fails with
// internal_error, and is recorded so.
func (x *Exchange) answered() {
	if x.Failed == nil && x.Answer == nil {
		x.Stage, x.Failed = "chain", envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
			WithDetail("the chain ended without an answer")
	}
}

// FailureResult is the answer for a failed call: the envelope as
// structuredContent and one text block "<code>: <message>".
func FailureResult(e *envelope.Error, retrySafe, replayed bool) *mcp.CallToolResult {
	env := envelope.Failure(e, retrySafe)
	env.Replayed = replayed
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(e.Code) + ": " + e.Message)},
		StructuredContent: envelope.Encode(env),
		IsError:           true,
	}
}

// MustJSON encodes envelope values, which always encode.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
