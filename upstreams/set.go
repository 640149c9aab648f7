package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/pins"
)

// Set is every configured upstream, each kept connected by a supervisor
// goroutine, and the catalog built from what they list.
//
// The catalog is rebuilt (and OnCatalogChange callbacks run) whenever an
// upstream's tool list changes: it connects for the first time, it comes
// back after a restart or reconnect with a different list, or it sends
// notifications/tools/list_changed. A server that goes down keeps its last
// known tools in the catalog; calls to them fail at once with a NotSent
// CallError (upstream_unavailable) until it is back.
type Set struct {
	servers []Server // as Start was given them
	log     *slog.Logger
	opts    options
	sups    map[string]*supervisor // enabled servers; fixed after Start
	catalog atomic.Pointer[Catalog]

	mu       sync.Mutex // guards listed, features, down and started
	listed   map[string][]Listed
	features map[string]*ServerFeatures
	down     map[string]string // servers with no known tool list, and why
	started  bool              // the first catalog is built; later changes rebuild it

	cbMu     sync.Mutex
	onChange []func(*Catalog)
	onStatus []func(server string, up bool, why string)
	onUpdate []func(server, uri string)
	logLevel atomic.Pointer[string] // the level last set for upstream logging; nil: never set
	notifyMu sync.Mutex
	notified *Catalog // the last catalog handed to the callbacks

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Option configures a Set.
type Option func(*options)

type options struct {
	backoff  Backoff
	debounce time.Duration
	wait     func(ctx context.Context, d time.Duration) bool // the backoff sleep; tests replace it
	pins     *pins.Store                                     // nil: no pinning
}

// WithBackoff sets how long supervisors wait between attempts to start or
// reach an upstream (default DefaultBackoff).
func WithBackoff(b Backoff) Option { return func(o *options) { o.backoff = b } }

// WithListDebounce sets how long a burst of tools/list_changed must stay
// quiet before the tool list is read again (default DefaultListDebounce).
func WithListDebounce(d time.Duration) Option { return func(o *options) { o.debounce = d } }

// Start starts a supervisor for every enabled server and waits for each
// one's first attempt to connect and list its tools, bounded by its
// init_timeout and by ctx, then builds the catalog. A server whose first
// attempt fails does not stop the others: it is logged, its tools answer
// upstream_unavailable, and its supervisor keeps trying with backoff. Only
// a catalog that cannot be built is an error. ctx bounds the first attempts
// only; the upstreams run until Close. The servers are taken in the order
// given (see Build); a server without a name or a name given twice is an
// error.
func Start(ctx context.Context, servers []Server, log *slog.Logger, opts ...Option) (*Set, error) {
	if err := checkNames(servers); err != nil {
		return nil, err
	}
	o := options{backoff: DefaultBackoff, debounce: DefaultListDebounce, wait: wait}
	for _, opt := range opts {
		opt(&o)
	}
	o.backoff = o.backoff.withDefaults()
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Set{servers: slices.Clone(servers), log: log, opts: o, sups: map[string]*supervisor{},
		listed: map[string][]Listed{}, features: map[string]*ServerFeatures{}, down: map[string]string{}, stop: stop}
	var booted []chan struct{}
	for i := range s.servers {
		srv := &s.servers[i]
		name := srv.Name
		if srv.Disabled {
			continue
		}
		sv := newSupervisor(s, srv)
		s.sups[name] = sv
		first := make(chan struct{})
		booted = append(booted, first)
		s.wg.Go(func() { sv.run(ctx, life, first) })
	}
	for _, first := range booted {
		<-first
	}
	s.mu.Lock()
	s.started = true
	cat, err := s.buildLocked()
	if err == nil {
		s.catalog.Store(cat)
	}
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	s.logCatalog(cat, "")
	s.notifyMu.Lock()
	s.notified = cat
	s.notifyMu.Unlock()
	return s, nil
}

// buildLocked builds a catalog from the current listings. s.mu is held.
func (s *Set) buildLocked() (*Catalog, error) {
	return BuildWith(s.servers, s.listed, s.down, BuildOptions{Pins: s.opts.pins, Features: s.features})
}

// listedTools records what a server listed after it (re)connected or told
// of a change, and rebuilds the catalog unless nothing changed.
func (s *Set) listedTools(server string, tools []Listed, feats *ServerFeatures) {
	s.mu.Lock()
	_, wasDown := s.down[server]
	prev, had := s.listed[server]
	if had && !wasDown && reflect.DeepEqual(prev, tools) && sameFeatures(s.features[server], feats) {
		s.mu.Unlock()
		return
	}
	s.listed[server] = tools
	s.features[server] = feats
	delete(s.down, server)
	if !s.started {
		s.mu.Unlock()
		return
	}
	cat, err := s.buildLocked()
	if err != nil {
		s.mu.Unlock()
		s.log.Error("tool catalog not rebuilt; keeping the previous one", "server", server, "err", err)
		return
	}
	s.catalog.Store(cat)
	s.mu.Unlock()
	s.logCatalog(cat, server)
	s.log.Info("tool catalog rebuilt", "server", server, "tools", len(tools))
	s.notify()
}

// failedAttempt records why a server that never listed its tools is down
// (it shows in the catalog built at Start). A server with a known list
// keeps it.
func (s *Set) failedAttempt(server, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.listed[server]; !had {
		s.down[server] = why
	}
}

// notify hands the current catalog to every callback, unless they have
// seen it already. Concurrent rebuilds may coalesce: the callbacks always
// end up having seen the newest catalog.
func (s *Set) notify() {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	cat := s.catalog.Load()
	if cat == s.notified {
		return
	}
	s.notified = cat
	s.cbMu.Lock()
	fns := slices.Clone(s.onChange)
	s.cbMu.Unlock()
	for _, fn := range fns {
		s.runCallback(fn, cat)
	}
}

func (s *Set) runCallback(fn func(*Catalog), cat *Catalog) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("catalog change callback panicked", "panic", fmt.Sprint(r))
		}
	}()
	fn(cat)
}

// OnCatalogChange registers fn to be called with the new catalog after
// every catalog swap: an upstream came up (after a failed start, a restart
// or a reconnect) with a tool list that differs from the last one, or its
// tool list changed. It is not called for the catalog Start returns, nor
// after Close returned. Calls are serialised and run on a supervisor's
// goroutine: fn must not call Close or OnCatalogChange, and should be quick.
func (s *Set) OnCatalogChange(fn func(*Catalog)) {
	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	s.onChange = append(s.onChange, fn)
}

// OnStatusChange registers fn to be called when a server's connection
// comes up (after its tools were listed and the catalog updated) or goes
// down, and after every failed attempt to start or reach it (after the
// failure was logged); why says why it is down. Calls for one server come
// from its supervisor's goroutine, in order; fn must be quick and must not
// call Close.
func (s *Set) OnStatusChange(fn func(server string, up bool, why string)) {
	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	s.onStatus = append(s.onStatus, fn)
}

func (s *Set) statusChanged(server string, up bool, why string) {
	s.cbMu.Lock()
	fns := slices.Clone(s.onStatus)
	s.cbMu.Unlock()
	for _, fn := range fns {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.log.Error("status callback panicked", "panic", fmt.Sprint(r))
				}
			}()
			fn(server, up, why)
		}()
	}
}

// Retry makes a down server's supervisor try again now instead of at the end of its backoff: what kept
// it down may be gone (a user just connected an auth mode oauth upstream). A server that is up, or
// unknown, is left alone.
func (s *Set) Retry(server string) {
	sv, ok := s.sups[server]
	if !ok || sv.conn.Load() != nil {
		return
	}
	select {
	case sv.retry <- struct{}{}:
	default:
	}
}

// Catalog returns the current catalog.
func (s *Set) Catalog() *Catalog { return s.catalog.Load() }

// Status reports whether server has a live connection, and if not, why.
func (s *Set) Status(server string) (up bool, why string) {
	sv := s.sups[server]
	if sv == nil {
		return false, "not configured or disabled"
	}
	if sv.conn.Load() != nil {
		return true, ""
	}
	return false, sv.why()
}

// CallTool sends tools/call to a server over its current connection,
// without progress. It is the method proxy.Upstreams needs.
func (s *Set) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	return s.CallToolProgress(ctx, server, tool, args, nil)
}

// CallToolProgress sends tools/call to a server over its current
// connection. A server that is down (not started yet, restarting,
// reconnecting) fails at once with a NotSent CallError; a connection that
// goes down during the call fails it (NotSent if the request never left,
// Sent otherwise), never hangs. With onProgress set, the upstream's
// progress for this call goes to it (see Conn.CallToolProgress). When ctx
// ends first, the upstream is sent notifications/cancelled.
func (s *Set) CallToolProgress(ctx context.Context, server, tool string, args json.RawMessage, onProgress func(Progress)) (json.RawMessage, error) {
	conn, err := s.liveConn(server)
	if err != nil {
		return nil, err
	}
	return conn.CallToolProgress(ctx, tool, args, onProgress)
}

// liveConn is server's current connection, or a NotSent CallError saying
// why there is none.
func (s *Set) liveConn(server string) (*Conn, error) {
	sv := s.sups[server]
	if sv == nil {
		return nil, &CallError{Where: NotSent, Err: ErrNotConnected}
	}
	conn := sv.conn.Load()
	if conn == nil {
		return nil, &CallError{Where: NotSent, Err: fmt.Errorf("%w: %s", ErrNotConnected, sv.why())}
	}
	return conn, nil
}

// sameFeatures compares two listings by their JSON encoding: a resource
// template holds a compiled pattern that reflect.DeepEqual never finds
// equal, so every relist would rebuild the catalog.
func sameFeatures(a, b *ServerFeatures) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// Forward sends one request other than tools/call (resources/read,
// prompts/get, completion/complete, resources/subscribe, ...) to a server
// over its current connection, failing like CallToolProgress when it is
// down. Requests the upstream makes meanwhile go to the Relay in ctx.
func (s *Set) Forward(ctx context.Context, server, method string, params any) (json.RawMessage, error) {
	conn, err := s.liveConn(server)
	if err != nil {
		return nil, err
	}
	return conn.Forward(ctx, method, params)
}

// SetLogLevel sets the level of the log messages upstreams send
// (logging/setLevel) on every connected server that supports logging, now
// and whenever one (re)connects. It returns at once; failures are logged.
func (s *Set) SetLogLevel(level string) {
	s.logLevel.Store(&level)
	for _, sv := range s.sups {
		sv.pokeLevel()
	}
}

// currentLogLevel is the level last set, or "".
func (s *Set) currentLogLevel() string {
	if l := s.logLevel.Load(); l != nil {
		return *l
	}
	return ""
}

// OnResourceUpdated registers fn to be called when a server sends
// notifications/resources/updated. It runs on the transport's read loop:
// fn must not block.
func (s *Set) OnResourceUpdated(fn func(server, uri string)) {
	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	s.onUpdate = append(s.onUpdate, fn)
}

func (s *Set) resourceUpdated(server, uri string) {
	s.cbMu.Lock()
	fns := slices.Clone(s.onUpdate)
	s.cbMu.Unlock()
	for _, fn := range fns {
		fn(server, uri)
	}
}

// Close stops every supervisor and the upstream it runs, in parallel (each
// stdio child may take seconds to exit, and shutdown must not take that
// times the count), then closes the servers' Credentials that have a Close
// (a credentials.Source stops and waits for the token requests it still
// runs, which would otherwise outlive the Set by up to their 10s bound),
// and returns when no goroutine or child process of the Set is left. The
// Set owns the Credentials of the servers it was started with.
func (s *Set) Close() {
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		for i := range s.servers {
			if c, ok := s.servers[i].Credentials.(interface{ Close() }); ok {
				c.Close()
			}
		}
	})
}

// boundErr says when an attempt failed because init_timeout passed: which
// request went unanswered, within how long, and the keys an operator
// raises it with. upstreams does not read the config, but those keys are
// what gets edited: the server's own mcpServers.<name>.init_timeout, or
// limits.init_timeout for every server. For a command that fetches the
// server on its first start (npx, uvx) it adds that a cold cache is the
// likely cause. connect prefixes a failed tools/list with "tools/list: ";
// anything else failed in the dial, that is in initialize.
func boundErr(ctx context.Context, srv *Server, err error) error {
	if srv.InitTimeout <= 0 || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	what, both := "did not answer initialize", ""
	if msg := err.Error(); len(msg) >= len("tools/list:") && msg[:len("tools/list:")] == "tools/list:" {
		what, both = "answered initialize but not tools/list", ", which bounds the two together"
	}
	hint := ""
	base := srv.Command // the program's name: npx, npx.cmd, /usr/local/bin/uvx
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == '/' || base[i] == '\\' {
			base = base[i+1:]
			break
		}
	}
	if n := len(base); n > 4 && (base[n-4:] == ".cmd" || base[n-4:] == ".exe") {
		base = base[:n-4]
	}
	if srv.Transport == TransportStdio && slices.Contains([]string{"npx", "uvx"}, base) {
		hint = fmt.Sprintf("; %s downloads the server's packages on its first start, which on a cold cache can take longer than that", base)
	}
	return fmt.Errorf("%s within init_timeout %s%s: %w; raise it with mcpServers.%s.init_timeout (this server) or limits.init_timeout (every server)%s",
		what, srv.InitTimeout, both, err, srv.Name, hint)
}
