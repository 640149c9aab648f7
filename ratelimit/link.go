package ratelimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// Rate is the size and refill rate of one configured bucket.
type Rate struct {
	PerSecond float64 // > 0
	Burst     int     // >= 1
}

// Limits say which buckets a call takes from (config rate_limits).
type Limits struct {
	Principal *Rate           // every principal's own bucket, over all its calls
	Roles     map[string]Rate // each principal holding the role gets its own bucket of that size
	// Tools holds one bucket per canonical "<server>/<tool>", or
	// "<server>/*" for all of a server's calls, shared by every caller.
	Tools map[string]Rate
}

// Empty reports whether no bucket is configured.
func (l Limits) Empty() bool { return l.Principal == nil && len(l.Roles) == 0 && len(l.Tools) == 0 }

// Guard is the rate-limit link: a call takes a token from every bucket
// that applies to it, or is refused (rate_limited, retryable) with the
// wait in the message. A nil *Guard limits nothing.
type Guard struct {
	Limiter Limiter // Memory, or the Redis store that replicas share
	Limits  Limits
	// FailClosed refuses calls while the limiter fails (a shared store
	// unreachable) instead of letting them through unlimited. The refusal
	// is rate_limited, not upstream_unavailable: the upstream is fine, and
	// a client that backs off on rate_limited does the right thing.
	FailClosed bool
	Log        *slog.Logger
}

// limiterDownWait is the retry hint while the limiter cannot decide: about
// as long as the shared store's health check takes to notice it is back.
const limiterDownWait = time.Second

// Link is the guard's place in the chain. It runs after authorization, so
// a call that would be refused anyway takes no one's tokens, and before
// approvals and execution.
func (g *Guard) Link() pipeline.Link { return pipeline.Step("ratelimit", g.check) }

func (g *Guard) check(ctx context.Context, x *pipeline.Exchange) *envelope.Error {
	if g == nil || g.Limiter == nil {
		return nil
	}
	var roles []string
	if len(g.Limits.Roles) > 0 { // only then: it costs a role closure per call
		roles = x.Policy.RolesOf(x.Call.Subject)
	}
	buckets := g.Limits.bucketsFor(x.Call.Subject.Principal, roles, x.Tool)
	if len(buckets) == 0 {
		return nil
	}
	v, err := g.Limiter.Take(ctx, buckets)
	if err != nil {
		return g.limiterFailed(x, err)
	}
	if v.Allowed {
		return nil
	}
	return envelope.Errorf(envelope.RateLimited, "rate limit of %s reached; retry in %s", v.Denied.Scope, roundWait(v.RetryAfter)).
		WithDetail("bucket " + v.Denied.Key)
}

// bucketsFor lists the buckets one call takes from. Keys separate scopes
// with a prefix and fields with NUL, which no name contains.
func (l Limits) bucketsFor(principal string, roles []string, tool *upstreams.Tool) []Bucket {
	var out []Bucket
	add := func(key, scope string, r Rate) {
		out = append(out, Bucket{Key: key, Scope: scope, PerSecond: r.PerSecond, Burst: r.Burst})
	}
	if l.Principal != nil {
		add("p\x00"+principal, "principal "+principal, *l.Principal)
	}
	for _, role := range roles {
		if r, ok := l.Roles[role]; ok {
			add("r\x00"+role+"\x00"+principal, "role "+role+" for "+principal, r)
		}
	}
	if r, ok := l.Tools[tool.ID]; ok {
		add("t\x00"+tool.ID, "tool "+tool.ID, r)
	}
	if r, ok := l.Tools[tool.Server+"/*"]; ok {
		add("t\x00"+tool.Server+"/*", "server "+tool.Server, r)
	}
	return out
}

// limiterFailed is the answer when the limiter itself failed (a shared
// store unreachable): open, the call goes on unlimited and the log says
// so; closed, it is refused as rate limited.
func (g *Guard) limiterFailed(x *pipeline.Exchange, err error) *envelope.Error {
	if g.FailClosed {
		return envelope.Errorf(envelope.RateLimited, "rate limits cannot be checked right now; retry in %s", limiterDownWait).
			WithDetail("rate limiter unavailable: " + err.Error())
	}
	if g.Log != nil {
		g.Log.Warn("rate limiter unavailable; call not limited", "tool", x.Tool.ID, "err", err)
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
