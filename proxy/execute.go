package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
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

// execute runs the call upstream under the tool's deadline and classifies
// how the attempt ended. The per-upstream breaker and safe retries wrap this
// attempt (DESIGN §5).
func (p *Pipeline) execute(ctx context.Context, x *exchange) *envelope.Error {
	out := newOutbound(x)
	ctx, cancel := context.WithTimeout(ctx, x.tool.Timeout)
	defer cancel()
	x.attempts++
	raw, err := p.Upstreams.CallTool(ctx, out.server, out.tool, out.args)
	x.outcome = breaker.Classify(ctx, err)
	if x.outcome == breaker.Succeeded {
		x.raw = raw
		return nil
	}
	return attemptError(x, err)
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
	case breaker.Cancelled:
		return envelope.Errorf(envelope.UpstreamError, "the call was cancelled before the tool answered; its outcome is unknown").WithDetail(detail)
	default:
		return envelope.Errorf(envelope.UpstreamError, "the connection to %q failed during the call; its outcome is unknown", x.tool.Server).WithDetail(fmt.Sprint(detail))
	}
}
