package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The features that use the store, as error metrics label them. Each
// feature's store lives in its own package (ratelimit/redisstore,
// authz/redisstore, breaker/redisstore, dedup/redisstore,
// approvals/redisstore); the labels are kept here, in one list, so that the
// metrics can show every one of them at zero.
const (
	FeatureRateLimits = "rate_limits"
	FeaturePolicy     = "policy"
	FeatureBreaker    = "breaker"
	FeatureDedup      = "dedup"
	FeatureApprovals  = "approvals"
	// FeatureCredentials is the vault of per-user upstream credentials
	// (upstreams/credentials/vault/redisstore).
	FeatureCredentials = "credentials"
)

// Features lists every feature, so metrics can show each at zero.
var Features = []string{FeatureRateLimits, FeaturePolicy, FeatureBreaker, FeatureDedup, FeatureApprovals, FeatureCredentials}

// ErrUnavailable is returned, wrapped, by operations that were not tried
// because the store is known to be down.
var ErrUnavailable = errors.New("the shared state store is unavailable")

// errNotChecked is Err before the first PING answered.
var errNotChecked = errors.New("not checked yet")

// Health-check pacing. While up, one PING per pingEvery; while down, PINGs
// back off from minBackoff to maxBackoff, so recovery is noticed within
// maxBackoff without hammering a server that is starting.
const (
	defaultPingEvery  = time.Second
	minBackoff        = 50 * time.Millisecond
	defaultMaxBackoff = 2 * time.Second
)

// Options configure a Client. URL and both timeouts are required (config
// supplies its defaults).
type Options struct {
	URL         string // redis:// or rediss://; may carry a password, never logged
	KeyPrefix   string // starts every key and channel
	DialTimeout time.Duration
	OpTimeout   time.Duration
	Log         *slog.Logger // nil: no logs
	// OnStatus is called with every change of health (and once with the
	// first result), from the health-check goroutine.
	OnStatus func(up bool)
	// OnError is called for every failed operation, by feature.
	OnError func(feature string)

	// PingEvery and MaxBackoff pace the health check (tests shorten them).
	PingEvery, MaxBackoff time.Duration
}

// Client is the connection to the shared store and its health. It is safe
// for concurrent use; Close stops everything it started.
type Client struct {
	rdb    *redis.Client
	opts   Options
	log    *slog.Logger
	cancel context.CancelFunc
	ctx    context.Context // ends at Close
	wg     sync.WaitGroup
	kick   chan struct{} // asks the health check to look now

	mu      sync.Mutex
	err     error         // nil while up
	up      chan struct{} // closed while up
	closers []func()      // run at Close, before waiting for the goroutines
	upHooks []func()      // run when the health check sees the store come back (onUp)
}

// Open connects to the store and starts its health check. The first PING
// runs before Open returns, so Err is meaningful at once; a store that is
// down is not an error here (the gateway starts, reports itself not ready,
// and recovers when the store comes up). A URL that cannot be used is.
func Open(o Options) (*Client, error) {
	if o.DialTimeout <= 0 || o.OpTimeout <= 0 {
		return nil, errors.New("state: the dial and operation timeouts must be positive")
	}
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("state.redis.url cannot be used: %v", withoutURL(err))
	}
	applyOptions(ro, o)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	routeLibraryLog(o.Log)
	if o.PingEvery <= 0 {
		o.PingEvery = defaultPingEvery
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{rdb: redis.NewClient(ro), opts: o, log: o.Log, ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), err: errNotChecked, up: make(chan struct{})}
	c.setStatus(c.ping(ctx))
	c.wg.Add(1)
	go c.monitor(ctx)
	return c, nil
}

// Ping connects to the store once and asks PING, within the dial and
// operation timeouts: for `toolgate check`, which reports a store it
// cannot reach. The error never holds the URL (it may carry a password).
func Ping(ctx context.Context, o Options) error {
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return fmt.Errorf("state.redis.url cannot be used: %v", withoutURL(err))
	}
	applyOptions(ro, o)
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout+o.OpTimeout)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// applyOptions bounds every wait by the configured timeouts and turns off
// what could send a command twice or stall a call: an operation that timed
// out may have run (a script that took tokens), so it is never retried.
func applyOptions(ro *redis.Options, o Options) {
	ro.DialTimeout = o.DialTimeout
	ro.DialerRetries = 1
	ro.ReadTimeout, ro.WriteTimeout = o.OpTimeout, o.OpTimeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.PoolTimeout = o.OpTimeout
	ro.DisableIdentity = true // CLIENT SETINFO is refused by Redis before 7.2
	// Maintenance notifications are for managed clusters moving nodes; a
	// single server needs none, and they would add a command per connection.
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// libraryLog receives go-redis's own log lines. The library logs through
// one process-wide logger; unrouted, it writes plain lines to stderr beside
// the gateway's structured log, and repeats on every failed dial what the
// health check already reports once.
type libraryLog struct{ log atomic.Pointer[slog.Logger] }

var redisLog = func() *libraryLog {
	l := &libraryLog{}
	l.log.Store(slog.New(slog.DiscardHandler))
	redis.SetLogger(l)
	return l
}()

func (l *libraryLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Load().DebugContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// routeLibraryLog sends go-redis's lines to log, at debug level: the last
// client opened wins, which in the gateway is the only one.
func routeLibraryLog(log *slog.Logger) { redisLog.log.Store(log) }

// withoutURL keeps go-redis's reason but never the URL, which may hold a
// password (url.Parse errors quote it).
func withoutURL(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return "it does not parse"
	}
	return err.Error()
}

// Close stops the health check and every feature's goroutines, and closes
// the connections.
func (c *Client) Close() {
	c.cancel()
	c.mu.Lock()
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for _, fn := range closers {
		fn()
	}
	c.wg.Wait()
	_ = c.rdb.Close()
}

// Err is nil while the store answers, else why it does not (as of the last
// health check). It never blocks.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// ready is closed while the store is up.
func (c *Client) ready() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

// Key is name under the configured prefix: every key and channel a
// feature uses goes through it.
func (c *Client) Key(name string) string { return c.opts.KeyPrefix + name }

// Redis is the connection pool, for a feature's commands and scripts: run
// them inside Do, so they are bounded, counted, and skipped while the
// store is down.
func (c *Client) Redis() *redis.Client { return c.rdb }

// Log is the client's logger, for a feature's own lines.
func (c *Client) Log() *slog.Logger { return c.log }

// Context ends when Close is called: a feature's background work stops
// with it.
func (c *Client) Context() context.Context { return c.ctx }

// ConnectTimeout bounds an operation that may need a new connection first:
// the dial timeout on top of the operation timeout.
func (c *Client) ConnectTimeout() time.Duration { return c.opts.DialTimeout + c.opts.OpTimeout }

// Do runs op for feature, bounded by the operation timeout. While the store
// is known down it fails at once with ErrUnavailable: no call waits on a
// dead server. A failure is counted under feature and makes the health
// check look again now, unless it came from ctx ending.
func (c *Client) Do(ctx context.Context, feature string, op func(ctx context.Context) error) error {
	if err := c.Err(); err != nil {
		c.failed(feature)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	opCtx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	err := op(opCtx)
	if err != nil && ctx.Err() == nil { // a caller that left says nothing about the store
		c.failed(feature)
		c.lookNow()
	}
	return err
}

func (c *Client) failed(feature string) {
	if c.opts.OnError != nil {
		c.opts.OnError(feature)
	}
}

// lookNow asks the health check to PING at once rather than at its next
// tick, so a failure seen by an operation is confirmed quickly.
func (c *Client) lookNow() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// monitor PINGs the store until Close: every PingEvery while it answers,
// with a doubling backoff while it does not.
func (c *Client) monitor(ctx context.Context) {
	defer c.wg.Done()
	backoff := minBackoff
	for {
		wait := c.opts.PingEvery
		if c.Err() != nil {
			wait, backoff = backoff, min(2*backoff, c.opts.MaxBackoff)
		} else {
			backoff = minBackoff
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.kick:
			t.Stop()
		case <-t.C:
		}
		c.setStatus(c.ping(ctx))
	}
}

// ping may need a new connection: it gets the dial timeout on top of the
// operation timeout.
func (c *Client) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.ConnectTimeout())
	defer cancel()
	return c.rdb.Ping(ctx).Err()
}

// setStatus records a health-check result, logging and reporting changes.
func (c *Client) setStatus(err error) {
	if c.ctx.Err() != nil {
		return // closing: a failed last PING says nothing about the store
	}
	c.mu.Lock()
	wasUp, known := c.err == nil, c.err != errNotChecked
	c.err = err
	switch {
	case err == nil && !wasUp:
		close(c.up)
	case err != nil && wasUp:
		c.up = make(chan struct{})
	}
	c.mu.Unlock()
	if known && wasUp == (err == nil) {
		return
	}
	if err != nil {
		c.log.Error("shared state store (Redis) unreachable; each feature applies its failure behaviour until it is back", "err", err)
	} else {
		c.log.Info("shared state store (Redis) reachable")
	}
	if c.opts.OnStatus != nil {
		c.opts.OnStatus(err == nil)
	}
	if err == nil && known {
		c.runUpHooks()
	}
}

// OnUp registers fn to run, from the health-check goroutine, each time the
// store answers again after it did not: fn must not block.
func (c *Client) OnUp(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upHooks = append(c.upHooks, fn)
}

func (c *Client) runUpHooks() {
	c.mu.Lock()
	hooks := c.upHooks
	c.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// Backoff is a doubling wait, from minBackoff up to the client's maximum,
// for loops that retry while the store misbehaves.
type Backoff struct {
	next, max time.Duration
}

// NewBackoff starts a backoff at its shortest wait.
func (c *Client) NewBackoff() *Backoff { return &Backoff{next: minBackoff, max: c.opts.MaxBackoff} }

// Wait is the next wait, each twice the last, up to the maximum.
func (b *Backoff) Wait() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}

// Reset starts again from the shortest wait.
func (b *Backoff) Reset() { b.next = minBackoff }

// WaitUp waits at least d, then until the store is up. It is false when
// ctx ends first (the client is closing).
func (c *Client) WaitUp(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.ready():
		return true
	}
}

// Go runs fn on a goroutine that Close waits for, with a context that ends
// at Close; stop, if not nil, is run at Close to unblock it.
func (c *Client) Go(fn func(ctx context.Context), stop func()) {
	c.mu.Lock()
	if stop != nil {
		c.closers = append(c.closers, stop)
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
	}()
}
