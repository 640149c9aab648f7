package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// outbound is the request that goes upstream, built from the inbound call
// and the catalog entry: the upstream's own tool name, the validated
// argument bytes unchanged.
type outbound struct {
	server, tool string
	args         []byte
}

func newOutbound(x *exchange) outbound {
	return outbound{server: x.tool.Server, tool: x.tool.Upstream, args: x.call.Args}
}

// execute runs the call upstream under the tool's deadline (DESIGN §5): it
// takes a slot under the server's in-flight limit, then makes attempts
// through the server's circuit breaker, repeating one only when the
// outcome allows it for this tool, the retry budget has room, and the
// backoff fits before the deadline.
func (p *Pipeline) execute(ctx context.Context, x *exchange) *envelope.Error {
	r := &p.Resilience
	out := newOutbound(x)
	ctx, cancel := context.WithTimeout(ctx, x.tool.Timeout)
	defer cancel()
	x.safe = r.retrySafe(x.tool)
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
		raw, err, open := p.attempt(ctx, x, out)
		switch {
		case open != nil && last != nil:
			return last // the earlier attempt's outcome is what the caller needs to know
		case open != nil:
			return envelope.Errorf(envelope.UpstreamUnavailable, "server %q is unavailable (circuit open); %s",
				out.server, nextProbe(open)).WithDetail(open.Error())
		case x.outcome == breaker.Succeeded:
			x.raw = raw
			return nil
		}
		last = attemptError(x, err)
		if !r.mayRepeat(ctx, x, n, retry, budget, err) {
			return last
		}
	}
}

// attempt makes one attempt through the breaker. open is set, and nothing
// is sent, when the breaker refuses.
func (p *Pipeline) attempt(ctx context.Context, x *exchange, out outbound) (json.RawMessage, error, *breaker.OpenError) {
	done, err := p.Resilience.Breakers.Allow(out.server)
	if err != nil {
		var open *breaker.OpenError
		if errors.As(err, &open) {
			return nil, nil, open
		}
		return nil, nil, &breaker.OpenError{Server: out.server}
	}
	x.attempts++
	start := p.now()
	actx, span := p.Tracing.StartUpstream(ctx, out.server, "tools/call", x.attempts)
	raw, err := p.Upstreams.CallToolProgress(actx, out.server, out.tool, out.args, x.call.Progress)
	x.outcome = breaker.Classify(ctx, err)
	done(x.outcome)
	p.Metrics.UpstreamAttempt(out.server, x.outcome.String(), p.now().Sub(start))
	if err != nil {
		tracing.End(span, string(attemptError(x, err).Code))
	} else {
		tracing.End(span, "")
	}
	return raw, err, nil
}

func nextProbe(open *breaker.OpenError) string {
	if open.RetryIn <= 0 {
		return "it is being probed; try again shortly"
	}
	return "next attempt possible in " + open.RetryIn.Round(time.Second).String()
}

// attemptError turns a failed attempt into the client's error.
func attemptError(x *exchange, err error) *envelope.Error {
	detail := err.Error()
	switch x.outcome {
	case breaker.ToolError:
		var ce *upstreams.CallError
		msg := "the tool reported an error"
		if errors.As(err, &ce) && ce.RPC != nil {
			msg = sanitize.Clip(sanitize.Text(ce.RPC.Message), maxToolMessage)
		}
		return (&envelope.Error{Code: envelope.ToolFailed, Message: msg}).WithDetail(detail)
	case breaker.NeverSent:
		return envelope.Errorf(envelope.UpstreamUnavailable, "server %q is unavailable; the call was not sent", x.tool.Server).WithDetail(detail)
	case breaker.TimedOut:
		return envelope.Errorf(envelope.ToolTimeout, "no answer from %q within %s", x.tool.Name, x.tool.Timeout).WithDetail(detail)
	case breaker.Oversize:
		return envelope.Errorf(envelope.ResultTooLarge, "the result is larger than the %d byte limit", x.tool.MaxResultBytes).WithDetail(detail)
	case breaker.RateLimited:
		return envelope.Errorf(envelope.RateLimited, "server %q is rate limiting calls; try again later", x.tool.Server).WithDetail(detail)
	case breaker.Cancelled:
		return envelope.Errorf(envelope.UpstreamError, "the call was cancelled before the tool answered; its outcome is unknown").WithDetail(detail)
	default:
		return envelope.Errorf(envelope.UpstreamError, "the connection to %q failed during the call; its outcome is unknown", x.tool.Server).WithDetail(detail)
	}
}
