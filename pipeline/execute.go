package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// Upstreams runs a tool on its server. onProgress, when not nil, receives
// the upstream's progress notifications for this call (the upstream sees a
// token of the gateway's, never the client's).
type Upstreams interface {
	CallToolProgress(ctx context.Context, server, tool string, args json.RawMessage, onProgress func(upstreams.Progress)) (json.RawMessage, error)
}

// An upstream call's error says where it failed, which decides its outcome,
// and which fault of the connection failed it with others, which the
// breaker counts once.
var (
	_ breaker.Located = (*upstreams.CallError)(nil)
	_ breaker.Fault   = (*upstreams.CallError)(nil)
)

// Executor runs calls upstream; Upstreams is required, the rest may be
// left zero.
type Executor struct {
	Upstreams  Upstreams
	Resilience Resilience       // breakers, retries, in-flight limits
	Metrics    *metrics.Metrics // upstream attempts; nil counts nothing
	Tracing    *tracing.Tracing // a span per attempt; nil traces nothing
	Now        func() time.Time // time.Now when nil
	// Redact replaces secrets in the error text an upstream sends (a tool's
	// JSON-RPC error message, a transport error) before it reaches the
	// client, the log or the audit trail; nil redacts nothing.
	Redact *redact.Redactor
}

// Link is the execute link. It is the last that may send anything
// upstream; normalize follows it.
func (e *Executor) Link() Link {
	return Step("execute", func(ctx context.Context, x *Exchange) *envelope.Error {
		return redactError(e.Redact, x, e.execute(ctx, x))
	})
}

// outbound is the request that goes upstream, built from the inbound call
// and the catalog entry: the upstream's own tool name, the validated
// argument bytes unchanged.
type outbound struct {
	server, tool string
	args         []byte
}

func newOutbound(x *Exchange) outbound {
	return outbound{server: x.Tool.Server, tool: x.Tool.Upstream, args: x.Call.Args}
}

// execute runs the call upstream under the tool's deadline
// (docs/design.md, "Failure semantics"): it
// takes a slot under the server's in-flight limit, then makes attempts
// through the server's circuit breaker, repeating one only when the
// outcome allows it for this tool, the retry budget has room, and the
// backoff fits before the deadline. An attempt the upstreams refused
// because the server is known to be down (its supervisor is restarting or
// reconnecting it) is not repeated: the supervisor's backoff decides when
// the server is tried again, and the call fails at once as
// upstream_unavailable.
func (e *Executor) execute(ctx context.Context, x *Exchange) *envelope.Error {
	r := &e.Resilience
	out := newOutbound(x)
	if x.Tool.Timeout > 0 { // 0: no deadline of the gateway's own (the caller's still holds)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.Tool.Timeout)
		defer cancel()
	}
	release, ok := r.acquire(out.server)
	if !ok {
		return envelope.Errorf(envelope.UpstreamUnavailable, "server %q is busy (%d calls in flight); the call was not sent",
			out.server, r.InFlight[out.server].Limit())
	}
	defer release()
	budget := r.Budgets[out.server]
	if budget != nil {
		budget.Attempt()
	}
	retry := r.Retry[out.server]
	var last *envelope.Error
	for n := 1; ; n++ {
		raw, err, open := e.attempt(ctx, x, out)
		switch {
		case open != nil && last != nil:
			return last // the earlier attempt's outcome is what the caller needs to know
		case open != nil:
			return envelope.Errorf(envelope.UpstreamUnavailable, "server %q is unavailable (circuit open); %s",
				out.server, nextProbe(open)).WithDetail(open.Error())
		case x.Outcome == breaker.Succeeded:
			x.Raw = raw
			return nil
		case upstreams.KnownDown(err):
			// Not repeated: the supervisor's backoff decides when the server
			// is tried again. After an attempt that was sent, as when retries
			// run out on attempts not sent, the caller hears the last one
			// (Exchange.SentNothing still knows an earlier one may have run).
			return attemptError(x, err)
		case isCredentialError(err):
			// Not repeated: the credential source holds a failure back for a
			// while, and a refused caller stays refused.
			return attemptError(x, err)
		}
		last = attemptError(x, err)
		if !r.mayRepeat(ctx, x, n, retry, budget, err) {
			return last
		}
	}
}

// attempt makes one attempt through the breaker. open is set, and nothing
// is sent, when the breaker refuses.
func (e *Executor) attempt(ctx context.Context, x *Exchange, out outbound) (json.RawMessage, error, *breaker.OpenError) {
	done, err := e.Resilience.Breakers.Allow(out.server)
	if err != nil {
		var open *breaker.OpenError
		if errors.As(err, &open) {
			return nil, nil, open
		}
		return nil, nil, &breaker.OpenError{Server: out.server}
	}
	x.Attempts++
	start := e.now()
	actx, span := e.Tracing.StartUpstream(ctx, out.server, "tools/call", x.Attempts)
	raw, err := e.Upstreams.CallToolProgress(actx, out.server, out.tool, out.args, x.Call.Progress)
	x.Outcome = breaker.Classify(ctx, err)
	if r := refusalOf(err); r != nil {
		if e.Redact != nil { // counted where the envelope's message is (redactError)
			r.Message, _ = e.Redact.Uncounted().String(r.Message)
		}
		NoteProtocolRefusal(ctx, r) // the transport answers the client with it (RefusalSlot)
	}
	done(e.Resilience.Breakers.OncePerFault(out.server, breakerOutcome(x.Outcome, err), err))
	e.Metrics.UpstreamAttempt(out.server, x.Outcome.String(), e.now().Sub(start))
	if err != nil {
		tracing.End(span, string(attemptError(x, err).Code))
	} else {
		tracing.End(span, "")
	}
	return raw, err, nil
}

// breakerOutcome is what the breaker is told of an attempt: its outcome,
// except that a refusal because the server is known to be down
// (upstreams.KnownDown) counts neither way, as a cancelled attempt does:
// the server's supervisor already knows and retries it with its own
// backoff. A request that failed on a connection thought to be up (a dial
// refused, say) still counts. The attempts one fault of the connection
// failed together (a stray stdio line, the child's output ending) count
// once: breaker.Set.OncePerFault, where the attempt is reported.
//
// An attempt not sent for want of a credential (the authorization server
// down or refusing, a caller with no JWT to exchange) counts neither way
// either: it says nothing about the upstream, and one caller's refusals
// must not open the breaker for the others.
func breakerOutcome(o breaker.Outcome, err error) breaker.Outcome {
	if o == breaker.NeverSent && (upstreams.KnownDown(err) || isCredentialError(err)) {
		return breaker.Cancelled
	}
	return o
}

func isCredentialError(err error) bool {
	is, _ := upstreams.IsCredentialError(err)
	return is
}

func nextProbe(open *breaker.OpenError) string {
	if open.RetryIn <= 0 {
		return "it is being probed; try again shortly"
	}
	return "next attempt possible in " + open.RetryIn.Round(time.Second).String()
}

// attemptError turns a failed attempt into the client's error.
func attemptError(x *Exchange, err error) *envelope.Error {
	detail := err.Error()
	switch x.Outcome {
	case breaker.ToolError:
		var ce *upstreams.CallError
		msg := "the tool reported an error"
		if errors.As(err, &ce) && ce.RPC != nil {
			msg = sanitize.Clip(sanitize.Text(ce.RPC.Message), maxToolMessage)
		}
		if r := refusalOf(err); r != nil {
			// Not the tool's failure: the upstream refused the request (a
			// transport that can relays the JSON-RPC error itself). The
			// audit record and log carry this message and the detail.
			msg = "the server refused the call: " + r.Message
		}
		return (&envelope.Error{Code: envelope.ToolFailed, Message: msg}).WithDetail(detail)
	case breaker.NeverSent:
		if msg, ok := upstreams.AuthorizationRequired(err); ok {
			return envelope.Errorf(envelope.AuthorizationRequired, "%s", msg).WithDetail(detail)
		}
		if is, refused := upstreams.IsCredentialError(err); refused {
			return envelope.Errorf(envelope.ToolNotAllowed, "server %q acts as the caller (token_exchange) and needs the caller's JWT; "+
				"this caller authenticated without one (an API key, stdio or anonymous)", x.Tool.Server).WithDetail(detail)
		} else if is {
			return envelope.Errorf(envelope.UpstreamUnavailable, "server %q: no credential could be had for the call (its authorization server "+
				"or the credential store failed); the call was not sent",
				x.Tool.Server).WithDetail(detail)
		}
		return envelope.Errorf(envelope.UpstreamUnavailable, "server %q is unavailable; the call was not sent", x.Tool.Server).WithDetail(detail)
	case breaker.TimedOut:
		return envelope.Errorf(envelope.ToolTimeout, "no answer from %q within %s", x.Tool.Name, x.Tool.Timeout).WithDetail(detail)
	case breaker.Oversize:
		return envelope.Errorf(envelope.ResultTooLarge, "the result is larger than the %d byte limit", x.Tool.MaxResultBytes).WithDetail(detail)
	case breaker.RateLimited:
		if after, _ := breaker.RetryAfter(err); after > 0 {
			return envelope.Errorf(envelope.RateLimited, "server %q is rate limiting calls; it asked to wait %s before trying again",
				x.Tool.Server, after.Round(time.Millisecond)).WithDetail(detail)
		}
		return envelope.Errorf(envelope.RateLimited, "server %q is rate limiting calls; try again later", x.Tool.Server).WithDetail(detail)
	case breaker.Cancelled:
		return envelope.Errorf(envelope.UpstreamError, "the call was cancelled before the tool answered; its outcome is unknown").WithDetail(detail)
	default:
		return envelope.Errorf(envelope.UpstreamError, "the connection to %q failed during the call; its outcome is unknown", x.Tool.Server).WithDetail(detail)
	}
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
