package upstreams

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/sanitize"
)

// Progress is one notifications/progress an upstream sent for a call.
// Message is sanitised and clipped.
type Progress struct {
	Progress float64
	Total    *float64
	Message  string
}

// Bounds of progress routing.
const (
	// maxQueuedProgress is how many notifications wait for a slow consumer;
	// beyond it the newest replaces the last queued one (progress only
	// grows, so the latest value is the one worth keeping).
	maxQueuedProgress = 64
	// maxProgressMessage bounds the message of one notification.
	maxProgressMessage = 1 << 10
)

// progressTokens are unique per process: a random prefix and a counter. The
// upstream sees them; it never sees the client's own token.
var (
	progressNonce = func() string {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	progressSeq atomic.Uint64
)

func newProgressToken() string {
	return "tg-" + progressNonce + "-" + strconv.FormatUint(progressSeq.Add(1), 10)
}

// progressRoute queues the notifications of one call for its caller. The
// transport's read loop only appends under a mutex and signals without
// blocking; the caller's own goroutine runs the callback.
//
// Progress must increase (MCP), but over Streamable HTTP notifications of
// one call can arrive out of order: mcp-go's server hands each session
// notification to whichever open response stream takes it first. A
// notification that does not increase the progress is dropped.
type progressRoute struct {
	mu     sync.Mutex
	queue  []Progress
	last   float64       // the highest progress queued so far
	any    bool          // something was queued
	signal chan struct{} // capacity 1: "something is queued"
}

func newProgressRoute() *progressRoute { return &progressRoute{signal: make(chan struct{}, 1)} }

func (r *progressRoute) push(p Progress) {
	r.mu.Lock()
	if r.any && p.Progress <= r.last {
		r.mu.Unlock()
		return
	}
	r.any, r.last = true, p.Progress
	if len(r.queue) >= maxQueuedProgress {
		r.queue[len(r.queue)-1] = p // coalesce: keep the newest
	} else {
		r.queue = append(r.queue, p)
	}
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// deliver hands every queued notification to fn, in order. A nil route or
// fn does nothing.
func (r *progressRoute) deliver(fn func(Progress)) {
	if r == nil || fn == nil {
		return
	}
	r.mu.Lock()
	q := r.queue
	r.queue = nil
	r.mu.Unlock()
	for _, p := range q {
		fn(p)
	}
}

// progressRoutes maps this connection's live tokens to their calls.
type progressRoutes struct {
	mu sync.Mutex
	m  map[string]*progressRoute
}

func (rs *progressRoutes) add(token string) *progressRoute {
	r := newProgressRoute()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*progressRoute{}
	}
	rs.m[token] = r
	return r
}

func (rs *progressRoutes) remove(token string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, token)
}

func (rs *progressRoutes) get(token string) *progressRoute {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[token]
}

// route queues a notifications/progress for the call whose token it names.
// Notifications for unknown tokens (a finished call, a token the gateway
// never sent) and malformed ones are dropped. Called on the read loop.
func (rs *progressRoutes) route(fields map[string]any) {
	token, ok := fields["progressToken"].(string)
	if !ok {
		return
	}
	r := rs.get(token)
	if r == nil {
		return
	}
	value, ok := finite(fields["progress"])
	if !ok {
		return
	}
	p := Progress{Progress: value}
	if total, ok := finite(fields["total"]); ok {
		p.Total = &total
	}
	if msg, ok := fields["message"].(string); ok {
		p.Message = sanitize.Clip(sanitize.Text(msg), maxProgressMessage)
	}
	r.push(p)
}

func finite(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}
