package upstreams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
)

// Backoff is how long a supervisor waits before its next attempt to start
// or reach an upstream: Initial after the first failure, doubling up to
// Max. An upstream that stayed up for ResetAfter starts over at Initial
// when it next goes down.
type Backoff struct {
	Initial, Max, ResetAfter time.Duration
}

// DefaultBackoff is what Start uses without WithBackoff: 1s doubling to 1m,
// reset after a minute up. Tests may set it before Start (Start copies it).
var DefaultBackoff = Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Minute}

// DefaultListDebounce is what Start uses without WithListDebounce: a burst
// of tools/list_changed is read once, after it has been quiet this long (or
// after listDebounceMax times this, if it never is).
var DefaultListDebounce = 250 * time.Millisecond

// listPoll is how often the supervisor re-reads the tools, resources and
// prompts of a 2026-07-28 upstream that does not serve
// subscriptions/listen, whose list changes it cannot hear of (listen.go).
// A minute keeps the catalog at most that stale for one small request per
// list a minute; a reconnect re-reads them too. Tests set it before Start.
var listPoll = time.Minute

// listDebounceMax bounds the wait for a quiet moment, so an upstream that
// never stops announcing changes is still re-read now and then.
const listDebounceMax = 8

// stderrTailWait bounds the wait for a dead child's stderr to end before
// its tail is logged.
const stderrTailWait = time.Second

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max < b.Initial {
		b.Max = max(b.Initial, DefaultBackoff.Max)
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = DefaultBackoff.ResetAfter
	}
	return b
}

// delay is the wait after the given number of consecutive failures (0: the
// first).
func (b Backoff) delay(failures int) time.Duration {
	d := b.Initial
	for range failures {
		if d >= b.Max/2 {
			return b.Max
		}
		d *= 2
	}
	return min(d, b.Max)
}

// supervisor keeps one upstream connected: it dials, lists, watches the
// connection, re-lists on tools/list_changed, and after the connection goes
// down (a stdio child exited or its output ended, an HTTP session ended or
// could not be reached, an SSE stream dropped) dials again with backoff.
type supervisor struct {
	set        *Set
	srv        *Server
	log        *slog.Logger
	maxMessage int

	conn    atomic.Pointer[Conn] // the live connection; nil while down
	whyDown atomic.Pointer[string]
	kick    chan struct{} // capacity 1: the tool list may have changed
	level   chan struct{} // capacity 1: the log level clients chose changed
	retry   chan struct{} // capacity 1: try again now rather than at the end of the backoff

	// era is the protocol era the last connection spoke, when the config
	// names none and it was 2026-07-28: the next connection starts there
	// (era.go). Only the supervisor's goroutine uses it.
	era string
	// listenLogged: that the upstream lacks subscriptions/listen was
	// logged (once, not on every reconnect).
	listenLogged atomic.Bool
}

func newSupervisor(s *Set, srv *Server) *supervisor {
	sv := &supervisor{set: s, srv: srv, log: s.log.With("server", srv.Name),
		maxMessage: srv.maxMessageBytes(), kick: make(chan struct{}, 1), level: make(chan struct{}, 1),
		retry: make(chan struct{}, 1)}
	sv.setWhy("not started yet")
	return sv
}

func (sv *supervisor) setWhy(why string) { sv.whyDown.Store(&why) }

func (sv *supervisor) why() string { return *sv.whyDown.Load() }

// poke asks for a re-list. It runs on a transport's read loop: never block.
func (sv *supervisor) poke() {
	select {
	case sv.kick <- struct{}{}:
	default:
	}
}

// pokeLevel asks serve to pass the current log level on. Pokes coalesce:
// however often clients change it, the supervisor sends only the latest,
// one request at a time, in order.
func (sv *supervisor) pokeLevel() {
	select {
	case sv.level <- struct{}{}:
	default:
	}
}

// run is the supervisor's life. Its first attempt is bounded by first (the
// Start context); booted is closed once that attempt is over. It returns,
// with the upstream stopped, when life ends.
func (sv *supervisor) run(first, life context.Context, booted chan struct{}) {
	bootDone := sync.OnceFunc(func() { close(booted) })
	defer bootDone()
	attempt := first
	failures := 0
	for {
		conn, tools, feats, err := sv.connect(attempt, life)
		attempt = life
		if life.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return
		}
		if err != nil {
			why := sv.srv.Redact.Text(sanitize.Text(err.Error()))
			delay := sv.set.opts.backoff.delay(failures)
			failures++
			sv.setWhy(fmt.Sprintf("%s (next attempt in %s)", why, delay))
			sv.set.failedAttempt(sv.srv.Name, why)
			attrs := []any{"err", why, "retry_in", delay, "attempt", failures}
			if se := (*startError)(nil); errors.As(err, &se) {
				attrs = append(attrs, "stderr_tail", strings.Join(se.tail, "\n"))
			}
			sv.log.Error("upstream unavailable", attrs...)
			bootDone()
			sv.set.statusChanged(sv.srv.Name, false, why)
			if !sv.backoff(life, delay) {
				return
			}
			continue
		}
		sv.conn.Store(conn)
		sv.log.Info("upstream connected", "tools", len(tools), "protocol", conn.Protocol())
		sv.set.listedTools(sv.srv.Name, tools, feats)
		bootDone()
		sv.set.statusChanged(sv.srv.Name, true, "")
		upSince := time.Now()

		sv.serve(life, conn)

		sv.setWhy(sv.srv.Redact.Text(sanitize.Text(fmt.Sprint(conn.Err()))) + " (restarting)")
		sv.conn.Store(nil)
		conn.Close()
		if life.Err() != nil {
			return
		}
		why := sv.downReason(conn)
		if time.Since(upSince) >= sv.set.opts.backoff.ResetAfter {
			failures = 0
		}
		delay := sv.set.opts.backoff.delay(failures)
		failures++
		sv.setWhy(fmt.Sprintf("%s (next attempt in %s)", why, delay))
		sv.logDown(conn, why, delay)
		sv.set.statusChanged(sv.srv.Name, false, why)
		if !sv.backoff(life, delay) {
			return
		}
	}
}

// backoff waits d before the next attempt, or less when Set.Retry asks; false when life ends.
func (sv *supervisor) backoff(life context.Context, d time.Duration) bool {
	ctx, cancel := context.WithCancel(life)
	defer cancel()
	go func() {
		select {
		case <-sv.retry:
			cancel()
		case <-ctx.Done():
		}
	}()
	sv.set.opts.wait(ctx, d)
	return life.Err() == nil
}

// downReason says why a closed connection went down: for a stdio child that
// exited, how it exited.
func (sv *supervisor) downReason(conn *Conn) string {
	cause := conn.Err()
	if conn.proc == nil {
		return sv.srv.Redact.Text(sanitize.Text(cause.Error()))
	}
	exited := fmt.Sprintf("upstream exited (%s)", conn.proc.status())
	if cause == ErrOutputEnded || errors.Is(cause, errExited) {
		return exited // the plain end of a process
	}
	return sv.srv.Redact.Text(sanitize.Text(cause.Error() + "; " + exited))
}

// logDown reports a connection that went down: for a stdio child, how it
// exited and the last lines of its stderr.
func (sv *supervisor) logDown(conn *Conn, why string, delay time.Duration) {
	if conn.proc == nil {
		sv.log.Warn("upstream connection lost", "err", why, "reconnect_in", delay)
		return
	}
	tail := conn.proc.stderrTail(stderrTailWait)
	sv.log.Warn("upstream exited", "exit", conn.proc.status(), "cause", why,
		"stderr_tail", strings.Join(tail, "\n"), "restart_in", delay)
}

// initBound bounds ctx by the server's init_timeout; a zero InitTimeout
// adds no bound.
func initBound(ctx context.Context, srv *Server) (context.Context, context.CancelFunc) {
	if srv.InitTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, srv.InitTimeout)
}

// connect dials the server and lists its tools, within its init_timeout.
// ctx bounds the attempt; life ends it too.
func (sv *supervisor) connect(ctx, life context.Context) (*Conn, []Listed, *ServerFeatures, error) {
	srv := sv.srv
	ctx, cancel := initBound(ctx, srv)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	conn, err := dial(ctx, srv, sv.maxMessage, sv.log, connHooks{supervised: true, listChanged: sv.poke, streamEnded: sv.poke,
		resourceUpdated: func(uri string) { sv.set.resourceUpdated(srv.Name, uri) }, logLevel: sv.set.currentLogLevel,
		listenRefused: sv.listenRefused, era: sv.era})
	if err != nil {
		return nil, nil, nil, boundErr(ctx, srv, err)
	}
	if srv.Protocol == "" {
		sv.era = ""
		if conn.modern {
			sv.era = conn.version()
		}
	}
	// The list read now is current: an older announcement is moot.
	select {
	case <-sv.kick:
	default:
	}
	tools, err := conn.ListTools(ctx)
	if err != nil {
		conn.Close()
		return nil, nil, nil, boundErr(ctx, srv, fmt.Errorf("tools/list: %w", listOverCap(srv, sv.maxMessage, err)))
	}
	feats := conn.listFeatures(ctx)
	sv.applyLogLevel(conn)
	return conn, tools, feats, nil
}

// listenRefused: the connection's upstream does not serve
// subscriptions/listen (listen.go). It runs on the listen request's
// goroutine: it logs (once for the supervisor's life) and asks for a
// re-list, which drops subscriptions from the upstream's features; serve
// then re-lists every listPoll.
func (sv *supervisor) listenRefused(err error) {
	if sv.listenLogged.CompareAndSwap(false, true) {
		sv.log.Warn("upstream does not support subscriptions/listen (2026-07-28), so its list_changed and resource update "+
			"notifications are not received: toolgate re-reads its tools, resources and prompts every "+listPoll.String()+
			" and on each reconnect, and refuses resources/subscribe for its resources",
			"err", sanitize.Text(err.Error()))
	}
	sv.poke()
}

// applyLogLevel passes the level clients last set on to the upstream, if
// it supports logging. Best effort: a failure is logged.
func (sv *supervisor) applyLogLevel(conn *Conn) {
	level := sv.set.logLevel.Load()
	if level == nil || conn.caps.Logging == nil || conn.modern {
		return // (2026-07-28 declares the level on each request instead)
	}
	ctx, cancel := initBound(conn.life, sv.srv)
	defer cancel()
	if _, err := conn.Forward(ctx, string(mcp.MethodSetLogLevel), map[string]string{"level": *level}); err != nil {
		sv.log.Warn("logging/setLevel failed", "err", sanitize.Text(err.Error()))
	}
}

// serve watches a live connection until it goes down or life ends,
// re-reading the tool list when the upstream says it changed (or, over
// HTTP, when its event stream ended: the read then also shows whether the
// session is still there).
func (sv *supervisor) serve(life context.Context, conn *Conn) {
	var poll <-chan time.Time // set once the upstream proves to lack subscriptions/listen
	for {
		if poll == nil && conn.ListenRefused() {
			t := time.NewTicker(listPoll)
			defer t.Stop()
			poll = t.C
		}
		select {
		case <-life.Done():
			return
		case <-conn.Done():
			return
		case <-sv.kick:
			if !sv.debounce(life, conn) {
				return
			}
			sv.relist(life, conn)
		case <-poll:
			sv.relist(life, conn)
		case <-sv.level:
			sv.applyLogLevel(conn)
		}
	}
}

// debounce waits until announcements have been quiet for the debounce
// period (at most listDebounceMax periods). It reports false when the
// connection or the supervisor ended meanwhile.
func (sv *supervisor) debounce(life context.Context, conn *Conn) bool {
	d := sv.set.opts.debounce
	if d <= 0 {
		return true
	}
	quiet := time.NewTimer(d)
	defer quiet.Stop()
	limit := time.NewTimer(listDebounceMax * d)
	defer limit.Stop()
	for {
		select {
		case <-sv.kick:
			quiet.Reset(d)
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
		case <-life.Done():
			return false
		case <-conn.Done():
			return false
		}
	}
}

// relist reads the tool list again; the Set rebuilds the catalog when it
// changed. A failure keeps the last list: a broken connection shows up on
// conn.Done, which serve watches.
func (sv *supervisor) relist(life context.Context, conn *Conn) {
	ctx, cancel := initBound(life, sv.srv)
	defer cancel()
	tools, err := conn.ListTools(ctx)
	if err != nil {
		if life.Err() == nil {
			err = listOverCap(sv.srv, sv.maxMessage, err)
			sv.log.Warn("tools/list failed; keeping the last list", "err", sanitize.Text(err.Error()))
		}
		return
	}
	sv.set.listedTools(sv.srv.Name, tools, conn.listFeatures(ctx))
}

// wait sleeps d, or until ctx ends (then it reports false).
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
