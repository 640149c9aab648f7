package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/canonjson"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// Call is one inbound tools/call as the client sent it. Stages read it and
// never change it; what goes upstream is built fresh from it (outbound).
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
}

// Policy decides who may call what. *authz.Policy and *authz.Store (the
// hot-reloaded one) implement it. A Decision's Internal error is for the
// log only: it may carry stacks or file paths.
type Policy interface {
	Visible(s authz.Subject, obj string) bool
	Decide(req authz.Request) authz.Decision
}

// Upstreams runs a tool on its server. onProgress, when not nil, receives
// the upstream's progress notifications for this call (the upstream sees a
// token of the gateway's, never the client's).
type Upstreams interface {
	CallToolProgress(ctx context.Context, server, tool string, args json.RawMessage, onProgress func(upstreams.Progress)) (json.RawMessage, error)
}

// Pipeline runs tools/call. Its fields are its dependencies; all are
// required except Now and Log.
type Pipeline struct {
	Catalog   func() *upstreams.Catalog // the current catalog snapshot
	Policy    Policy
	Upstreams Upstreams
	// Resilience is applied by execute: breakers, retries, in-flight limits.
	Resilience Resilience
	// Approvals holds calls that policy says need a human approval; nil
	// requires none.
	Approvals *Approvals
	// Dedup suppresses duplicate calls of tools that are not retry-safe;
	// nil suppresses nothing.
	Dedup *Dedup
	// Metrics counts calls and times stages and upstream attempts; nil
	// counts nothing.
	Metrics *metrics.Metrics
	// Audit receives one record per call (record); nil keeps none. With
	// FailClosed, calls are refused before they run while it fails.
	Audit AuditTrail
	// Tracing spans each call, its stages and its upstream attempts; nil
	// (or off) traces nothing.
	Tracing *tracing.Tracing
	// RateLimits refuses calls past their token buckets; nil limits none.
	RateLimits *RateLimits
	Log        *slog.Logger
	Now        func() time.Time // clock for durations; time.Now when nil
}

// AuditTrail is the tamper-evident record of decisions (audit.Log).
type AuditTrail interface {
	Append(audit.Record) error
	Err() error
	FailClosed() bool
}

// stage is one step of the pipeline.
type stage struct {
	name string
	run  func(p *Pipeline, ctx context.Context, x *exchange) *envelope.Error
}

// stages is the pipeline order (DESIGN §2). Authentication happened at the
// transport before the call got here; record runs after, whatever happened.
var stages []stage

// afterDedup is where the stages deduplicate runs at most once begin.
var afterDedup int

// The order is set in init rather than in the declaration because
// deduplicate runs the later stages itself, and Go refuses a package
// variable whose initializer refers back to it.
func init() {
	stages = []stage{
		{"resolve", (*Pipeline).resolve},
		{"authorize", (*Pipeline).authorize},
		{"validate", (*Pipeline).validate},
		{"conditions", (*Pipeline).checkConditions},
		// guards:
		{"ratelimit", (*Pipeline).rateLimit},     // token buckets per principal, role and tool
		{"audit", (*Pipeline).auditable},         // with audit.fail_closed, nothing runs that cannot be recorded
		{"approve", (*Pipeline).approve},         // a call that needs a human approval waits for one
		{"deduplicate", (*Pipeline).deduplicate}, // runs the stages after it at most once per identical call
		{"execute", (*Pipeline).execute},
		{"normalize", (*Pipeline).normalize},
	}
	for i, st := range stages {
		if st.name == "deduplicate" {
			afterDedup = i + 1
		}
	}
}

// exchange is what the stages learn about one call.
type exchange struct {
	call    Call
	started time.Time
	// mark is when the last stage ended (started before the first): the
	// next stage's start, and after the stages the call's end. One clock
	// reading per stage instead of two.
	mark   time.Time
	policy Policy // the one policy every stage of this call is decided by

	tool     *upstreams.Tool     // set by resolve
	rule     string              // the policy line that allowed the call (file:line), when known
	approval string              // the approval request this call used up, if any
	raw      json.RawMessage     // the upstream's raw result, set by execute
	outcome  breaker.Outcome     // how the upstream attempt ended
	attempts int                 // upstream attempts made
	safe     bool                // the tool may be repeated after an unknown outcome
	answer   *mcp.CallToolResult // set by normalize on success

	stage  string          // the stage that stopped the call, if any
	failed *envelope.Error // why it stopped

	canonical    []byte // the arguments' canonical JSON, once computed (canonicalArgs)
	canonicalErr error

	finished bool          // a stage ran the rest of the pipeline (deduplicate)
	sharing  dedup.Sharing // how deduplicate settled the call; 0 when it did not apply
	replayed bool          // the answer is a recorded one from an earlier call
}

// Handle runs one call through every stage and returns the client's answer.
// It never returns a Go error: every failure is an envelope.
func (p *Pipeline) Handle(ctx context.Context, call Call) *mcp.CallToolResult {
	x := &exchange{call: call, started: p.now(), policy: p.policySnapshot()}
	x.mark = x.started
	ctx, span := p.Tracing.StartCall(ctx, call.Name, call.TraceMeta)
	tracing.SetCaller(span, call.Subject.Principal, call.Session)
	p.runStages(ctx, x, 0)
	if x.tool != nil && !x.tool.Guessed {
		tracing.SetTool(span, x.tool.ID)
	}
	tracing.End(span, x.errorCode())
	p.record(x)
	p.auditCall(x)
	p.Metrics.CallFinished(x.metricTool(), x.outcomeLabel(), x.errorCode(), x.duration())
	if x.failed != nil {
		return failureResult(x.failed, x.retrySafe(), x.replayed)
	}
	return x.answer
}

// runStages runs the stages from index from on, stopping at the first
// failure or when a stage has finished the exchange itself.
func (p *Pipeline) runStages(ctx context.Context, x *exchange, from int) {
	if from > 0 {
		// Run from inside a stage (deduplicate, approve): what that stage
		// did first is its own time, not the next stage's.
		x.mark = p.now()
	}
	for _, st := range stages[from:] {
		if err := p.runStage(ctx, st, x); err != nil {
			x.stage, x.failed = st.name, err
			return
		}
		if x.finished {
			return
		}
	}
}

// runStage runs one stage, turning a panic into internal_error so that a
// bug in one call never takes the gateway down.
func (p *Pipeline) runStage(ctx context.Context, st stage, x *exchange) (err *envelope.Error) {
	start := x.mark
	ctx, span := p.Tracing.StartStage(ctx, st.name)
	// Deferred first, so it runs after the recover below has set err.
	defer func() {
		code := ""
		if err != nil {
			code = string(err.Code)
		}
		tracing.End(span, code)
	}()
	defer func() {
		x.mark = p.now()
		p.Metrics.StageDuration(st.name, x.mark.Sub(start))
		if r := recover(); r != nil {
			err = envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
				WithDetail(fmt.Sprintf("panic in %s: %v\n%s", st.name, r, debug.Stack()))
		}
	}()
	return st.run(p, ctx, x)
}

// duration is the call's duration so far as the stages measured it: to
// the end of the last stage that ran. Logs, audit and metrics agree on it.
func (x *exchange) duration() time.Duration { return x.mark.Sub(x.started) }

func (p *Pipeline) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// canonicalArgs is the canonical JSON of the arguments ({} when none),
// computed once per call: approvals, duplicate suppression and the audit
// trail all identify the call by it.
func (x *exchange) canonicalArgs() ([]byte, error) {
	if x.canonical == nil && x.canonicalErr == nil {
		args := x.call.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		x.canonical, x.canonicalErr = canonjson.Canonical(args)
	}
	return x.canonical, x.canonicalErr
}

// metricTool is the call's tool as metrics label it: the canonical ID,
// never the client's string (unbounded label values).
func (x *exchange) metricTool() string {
	if x.tool == nil || x.tool.Guessed {
		return metrics.Unresolved
	}
	return x.tool.ID
}

func (x *exchange) outcomeLabel() string {
	if x.failed != nil {
		return "error"
	}
	return "ok"
}

func (x *exchange) errorCode() string {
	if x.failed != nil {
		return string(x.failed.Code)
	}
	return ""
}

// retrySafe reports whether the resolved tool may be repeated after an
// unknown outcome: it decides retryable for tool_timeout and upstream_error.
// It is known once execute ran; earlier failures never depend on it.
func (x *exchange) retrySafe() bool { return x.safe }

// failureResult is the answer for a failed call: the envelope as
// structuredContent and one text block "<code>: <message>".
func failureResult(e *envelope.Error, retrySafe, replayed bool) *mcp.CallToolResult {
	env := envelope.Failure(e, retrySafe)
	env.Replayed = replayed
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(e.Code) + ": " + e.Message)},
		StructuredContent: mustJSON(env),
		IsError:           true,
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only envelope values reach here; they always encode
	}
	return b
}

// policySnapshot is the policy one call is decided by. A hot-reloaded
// policy (authz.Store) is read once per call, so that authorization, its
// argument conditions and approval rules all come from the same version
// even when a reload lands in between.
func (p *Pipeline) policySnapshot() Policy {
	if s, ok := p.Policy.(interface{ Current() *authz.Policy }); ok {
		return s.Current()
	}
	return p.Policy
}
