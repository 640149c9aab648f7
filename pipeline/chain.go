package pipeline

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/tracing"
)

// Next runs the rest of the chain on the exchange and returns its error.
type Next func(ctx context.Context, x *Exchange) *envelope.Error

// Link is one step of the chain, of one of two kinds. A check (Check) looks
// at the call before the rest of the chain and either stops it with an
// error or lets it go on. A wrapping link (Wrap) does its work around the
// rest: it either stops the call, or calls next exactly once and returns
// what next returned (it may change the exchange's outcome after next, and
// then returns x.Failed). A link never runs next twice, nor from another
// goroutine.
type Link struct {
	Name  string
	Check func(ctx context.Context, x *Exchange) *envelope.Error
	Wrap  func(ctx context.Context, x *Exchange, next Next) *envelope.Error
	// Outer marks a link that wraps the whole call (record): it gets no
	// span of its own, since the call's span covers exactly it.
	Outer bool

	observe func(time.Duration) // its stage timer, set by New
}

// Step is a check: when check returns nil, the call goes on.
func Step(name string, check func(ctx context.Context, x *Exchange) *envelope.Error) Link {
	return Link{Name: name, Check: check}
}

// Options are what the chain itself needs; every field may be left zero.
type Options struct {
	// Policy is the policy a call is decided by, read once per call (a
	// hot-reloaded store returns its current version). Nil denies every
	// call (DenyAll).
	Policy func() Policy
	// Metrics times each link (toolgate_stage_duration_seconds); nil
	// times nothing.
	Metrics *metrics.Metrics
	// Tracing spans each call and each link; nil traces nothing.
	Tracing *tracing.Tracing
	// Now is the clock for durations; time.Now when nil.
	Now func() time.Time
}

// Chain runs the links of a tools/call in order.
type Chain struct {
	links []Link
	opts  Options
	next  Next // c.handOver, bound once so that running a link allocates nothing
}

// New builds a chain of the links, which run in the order given. A link
// that is not exactly one of a check and a wrap is a bug in its package,
// found here at startup rather than on a call.
func New(opts Options, links ...Link) *Chain {
	for _, l := range links {
		if (l.Check == nil) == (l.Wrap == nil) {
			panic(fmt.Sprintf("pipeline: link %q must have exactly one of Check and Wrap", l.Name))
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Policy == nil {
		opts.Policy = func() Policy { return DenyAll{} }
	}
	links = append([]Link(nil), links...) // New sets each one's timer: the caller's slice stays as it was
	for i := range links {
		links[i].observe = opts.Metrics.StageTimer(links[i].Name)
	}
	c := &Chain{links: links, opts: opts}
	c.next = c.handOver
	return c
}

// Names are the links' names in the order they run.
func (c *Chain) Names() []string {
	names := make([]string, len(c.links))
	for i, l := range c.links {
		names[i] = l.Name
	}
	return names
}

// Handle runs one call through the chain and returns the client's answer.
// It never returns a Go error: every failure is an envelope.
func (c *Chain) Handle(ctx context.Context, call Call) *mcp.CallToolResult {
	x := &Exchange{Call: call, Started: c.opts.Now(), Policy: c.opts.Policy()}
	x.mark = x.Started
	ctx, span := c.opts.Tracing.StartCall(ctx, call.Name, call.TraceMeta)
	tracing.SetCaller(span, call.Subject.Principal, call.Session)
	c.run(ctx, x)
	if x.Tool != nil && !x.Tool.Guessed {
		tracing.SetTool(span, x.Tool.ID)
	}
	res := x.Result()
	tracing.End(span, x.ErrorCode())
	return res
}

// run runs the links from x.pos on: the checks one after the other, and
// the first wrapping link with the rest as its next. A link's time is its
// own, without the links it ran inside it: the clock is read when each
// link ends and when a wrapping link hands over, and what ran inside a
// wrapping link is subtracted from it. So the links' times add up to the
// call's, at one clock reading per check.
func (c *Chain) run(ctx context.Context, x *Exchange) *envelope.Error {
	for x.pos < len(c.links) {
		l := &c.links[x.pos]
		x.pos++
		if l.Wrap != nil {
			return c.wrap(ctx, x, l)
		}
		if err := c.check(ctx, x, l); err != nil {
			return err
		}
	}
	return nil
}

// check runs one check; its span is a child of the call's (or of the
// wrapping link it runs inside).
func (c *Chain) check(ctx context.Context, x *Exchange, l *Link) (err *envelope.Error) {
	start := x.mark
	ctx, span := c.opts.Tracing.StartStage(ctx, l.Name)
	defer func() {
		err = c.settle(x, l, recover(), err)
		end := c.opts.Now()
		l.observe(end.Sub(start))
		x.mark = end
		tracing.End(span, errorCode(err))
	}()
	return l.Check(ctx, x)
}

// wrap runs one wrapping link with the rest of the chain as its next; the
// links it runs are children of its span.
func (c *Chain) wrap(ctx context.Context, x *Exchange, l *Link) (err *envelope.Error) {
	start, parent := x.mark, ctx
	var span trace.Span
	if !l.Outer {
		ctx, span = c.opts.Tracing.StartStage(ctx, l.Name)
	}
	x.outer, x.outerSpan = parent, span
	x.inner = 0
	defer func() {
		err = c.settle(x, l, recover(), err)
		end := c.opts.Now()
		l.observe(end.Sub(start) - x.inner)
		x.mark = end
		if span != nil {
			// The span's status is the link's own refusal, not the
			// outcome of the links it ran (their spans carry theirs).
			own := ""
			if x.Stage == l.Name {
				own = errorCode(err)
			}
			tracing.End(span, own) // a no-op when the link passed the call on (Pass ended it)
		}
	}()
	return l.Wrap(ctx, x, c.next)
}

// handOver is the next a wrapping link gets: the rest of the chain, timed
// from the hand-over, its time left in x.inner for the link to subtract.
func (c *Chain) handOver(ctx context.Context, x *Exchange) *envelope.Error {
	x.mark = c.opts.Now()
	handedOver := x.mark
	err := c.run(ctx, x)
	x.inner = x.mark.Sub(handedOver)
	return err
}

// settle turns a panic into internal_error, so that a bug in one call
// never takes the gateway down, and names the link that stopped the call
// unless a link has set the outcome itself. A panic always wins, even
// over a failure the links inside a wrapping link answered before it
// panicked: the call's outcome is then unknown to the gateway itself.
func (c *Chain) settle(x *Exchange, l *Link, panicked any, err *envelope.Error) *envelope.Error {
	if panicked != nil {
		err = envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
			WithDetail(fmt.Sprintf("panic in %s: %v\n%s", l.Name, panicked, debug.Stack()))
		x.Stage, x.Failed = l.Name, err
		return err
	}
	if err != nil && x.Failed == nil {
		x.Stage, x.Failed = l.Name, err
	}
	return err
}

func errorCode(err *envelope.Error) string {
	if err == nil {
		return ""
	}
	return string(err.Code)
}
