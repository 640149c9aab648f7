package proxy

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/ratelimit"
	"github.com/toolgate/toolgate/upstreams"
)

// RateLimits are the token buckets calls take from (config rate_limits).
type RateLimits struct {
	Limiter ratelimit.Limiter
	// ByRole: some limit is per role, so the caller's roles are worked out
	// (only then: it costs a role closure per call).
	ByRole bool
	// Buckets are those a call takes a token from: the principal's own, one
	// per role it holds that has a limit, the tool's and its server's.
	Buckets func(s authz.Subject, roles []string, tool *upstreams.Tool) []ratelimit.Bucket
	// FailClosed refuses calls while the limiter fails (a shared store
	// unreachable) instead of letting them through unlimited. The refusal
	// is rate_limited, not upstream_unavailable: the upstream is fine, and
	// a client that backs off on rate_limited does the right thing.
	FailClosed bool
}

// limiterDownWait is the retry hint while the limiter cannot decide: about
// as long as the shared store's health check takes to notice it is back.
const limiterDownWait = time.Second

// rateLimit takes a token from every bucket that applies to the call, or
// refuses it (rate_limited, retryable) with the wait in the message. It
// runs after authorization, so a call that would be refused anyway takes
// no one's tokens, and before approvals and execution.
func (p *Pipeline) rateLimit(ctx context.Context, x *exchange) *envelope.Error {
	rl := p.RateLimits
	if rl == nil || rl.Limiter == nil || rl.Buckets == nil {
		return nil
	}
	var roles []string
	if r, ok := x.policy.(interface{ RolesOf(authz.Subject) []string }); ok && rl.ByRole {
		roles = r.RolesOf(x.call.Subject)
	}
	buckets := rl.Buckets(x.call.Subject, roles, x.tool)
	if len(buckets) == 0 {
		return nil
	}
	v, err := rl.Limiter.Take(ctx, buckets)
	if err != nil {
		return p.limiterFailed(x, err)
	}
	if v.Allowed {
		return nil
	}
	wait := roundWait(v.RetryAfter)
	return envelope.Errorf(envelope.RateLimited, "rate limit of %s reached; retry in %s", v.Denied.Scope, wait).
		WithDetail("bucket " + v.Denied.Key)
}

// limiterFailed is the answer when the limiter itself failed (a shared
// store unreachable): open, the call goes on unlimited and the log says
// so; closed, it is refused as rate limited.
func (p *Pipeline) limiterFailed(x *exchange, err error) *envelope.Error {
	if p.RateLimits.FailClosed {
		return envelope.Errorf(envelope.RateLimited, "rate limits cannot be checked right now; retry in %s", limiterDownWait).
			WithDetail("rate limiter unavailable: " + err.Error())
	}
	if p.Log != nil {
		p.Log.Warn("rate limiter unavailable; call not limited", "tool", x.tool.ID, "err", err)
	}
	return nil
}

// roundWait rounds a wait up, to milliseconds below a second and to tenths
// of a second above, so the caller never retries too early.
func roundWait(d time.Duration) time.Duration {
	unit := 100 * time.Millisecond
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1).Truncate(unit)
}
