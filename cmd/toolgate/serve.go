package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/dedup"
	dedupredis "github.com/toolgate/toolgate/dedup/redisstore"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// shutdownGrace is how long in-flight HTTP calls may run after SIGTERM.
const shutdownGrace = 10 * time.Second

func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	stdio := fs.Bool("stdio", false, "serve one client on stdin/stdout instead of HTTP")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tuneGC()
	log, err := newLogger(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gw, code := startGateway(ctx, *configPath, log)
	if gw == nil {
		return code
	}
	defer gw.close()
	watchPolicy(ctx, gw, log)
	if *stdio {
		return serveStdio(ctx, gw, log)
	}
	return serveHTTP(ctx, gw, log)
}

// gateway is everything serve builds before it accepts clients.
type gateway struct {
	cfg       *config.Config
	auth      *authn.Authenticator
	policy    *authz.Store
	approvals approvals.Store // the file, or Redis with state.redis
	set       *upstreams.Set
	server    *proxy.Server
	metrics   *metrics.Metrics
	health    *metrics.Health
	audit     *audit.Log // nil when audit.disabled
	tracing   *tracing.Tracing
	state     *state.Client // nil unless state.redis: the store replicas share
	replica   string        // this process among the replicas
}

// close releases what startGateway started: upstream processes and
// connections, JWKS refreshes.
func (gw *gateway) close() {
	gw.set.Close() // first: calls still running end, and record their outcome in the shared store
	if gw.state != nil {
		gw.state.Close() // before the audit trail: its announcements reload the policy, which is audited
	}
	gw.auth.Close()
	if gw.audit != nil {
		_ = gw.audit.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = gw.tracing.Shutdown(ctx) // the last spans get out
}

// startGateway loads and validates everything, failing fast with precise
// messages, then connects the upstreams.
func startGateway(ctx context.Context, path string, log *slog.Logger) (*gateway, int) {
	cfg, err := config.Load(path)
	if err != nil {
		printProblems(os.Stderr, "invalid configuration", err)
		return nil, 2
	}
	policy, err := authz.NewStore(cfg.ModelPath(), cfg.PolicyPath(), policyOptions(cfg), log)
	if err != nil {
		printProblems(os.Stderr, "invalid policy", err)
		return nil, 2
	}
	auth, err := authn.New(ctx, cfg, log)
	if err != nil {
		printProblems(os.Stderr, "invalid authentication settings", err)
		return nil, 2
	}
	approvalStore, err := openApprovals(cfg) // nil with state.redis: set once the store is open
	if err != nil {
		auth.Close()
		printProblems(os.Stderr, "invalid approvals file", err)
		return nil, 2
	}
	pinStore, err := openPins(cfg)
	if err != nil {
		auth.Close()
		printProblems(os.Stderr, "invalid tool pins", err)
		return nil, 2
	}
	set, err := upstreams.Start(ctx, cfg, log, upstreams.WithPins(pinStore))
	if err != nil {
		auth.Close()
		printProblems(os.Stderr, "cannot build the tool catalog", err)
		return nil, 2
	}
	m := metrics.New()
	trail, err := openAudit(cfg, m, log)
	if err != nil {
		set.Close()
		auth.Close()
		printProblems(os.Stderr, "cannot open the audit trail", err)
		return nil, 2
	}
	// Tracing is off unless the standard OTEL_* variables turn it on; a
	// setting it cannot honour (an unsupported exporter or protocol) is a
	// startup error rather than traces silently lost.
	tr, err := setupTracing(ctx, version)
	if err != nil {
		set.Close()
		auth.Close()
		if trail != nil {
			_ = trail.Close()
		}
		printProblems(os.Stderr, "invalid OpenTelemetry settings", err)
		return nil, 2
	}
	store, err := openState(cfg, m, log)
	if err != nil {
		set.Close()
		auth.Close()
		if trail != nil {
			_ = trail.Close()
		}
		_ = tr.Shutdown(ctx)
		printProblems(os.Stderr, "invalid state settings", err)
		return nil, 2
	}
	approvalStore = sharedApprovals(cfg, store, approvalStore)
	resilience := resilienceFrom(cfg, log)
	pipe := &proxy.Pipeline{Catalog: set.Catalog, Policy: policy, Upstreams: set, Log: log,
		Resilience: resilience, Dedup: dedupFrom(cfg, store), Metrics: m, Tracing: tr, RateLimits: rateLimitsFrom(cfg, store),
		Approvals: &proxy.Approvals{Store: approvalStore, Rules: policy}}
	if trail != nil {
		pipe.Audit = trail // (a nil *audit.Log in the interface would not be nil)
	}
	srv := proxy.NewServer(pipe, version, log)
	srv.SetFeatureRelay(proxy.FeatureRelay{Upstreams: set, Timeout: func(server string) time.Duration { return cfg.CallTimeout(server, "") }})
	set.OnResourceUpdated(srv.ResourceUpdated)
	set.OnStatusChange(func(server string, up bool, _ string) {
		if up {
			srv.Resubscribe(server)
		}
	})
	policy.Subscribe(func(old, next *authz.Policy) { srv.PolicyChanged(old, next) })
	// Restarts, reconnects and upstream list changes rebuild the catalog;
	// the client-facing tools follow (mcp-go sends tools/list_changed).
	set.OnCatalogChange(srv.SyncTools)
	gw := &gateway{cfg: cfg, auth: auth, policy: policy, approvals: approvalStore, set: set, server: srv,
		metrics: m, health: &metrics.Health{}, audit: trail, tracing: tr, state: store, replica: replicaID()}
	observe(gw, resilience.Breakers)
	shareBreakers(gw, resilience.Breakers)
	auditDecisions(gw, log)
	syncPolicy(gw)
	log.Info("toolgate ready", "config", cfg.File, "tools", len(set.Catalog().Tools()), "policy", policy.Current().Version(),
		"replica", gw.replica, "shared_state", store != nil)
	return gw, 0
}

// gcPercent is the garbage collector's target for the serving gateway
// unless GOGC says otherwise. Every call allocates (JSON in and out, the
// envelope, the audit record); at Go's default of 100 the collector took
// about 15% of the gateway's CPU under load. 400 lets the heap grow to five
// times the live data between collections instead of twice: measured with
// bench/, 15% more calls per second at 16 concurrent callers, for about
// 30 MB more memory under that load (the idle footprint barely changes).
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// setupTracing is tracing.Setup; tests replace it with an in-memory
// exporter.
var setupTracing = tracing.Setup

// resilienceFrom builds the per-upstream breakers, retry settings and
// budgets, and in-flight limits from config (DESIGN §5).
func resilienceFrom(cfg *config.Config, log *slog.Logger) proxy.Resilience {
	r := proxy.Resilience{
		Breakers: breaker.NewSet(breakerSettingsFrom(cfg), log),
		Budgets:  budgetsFrom(cfg, time.Now),
		Retry:    map[string]breaker.RetrySettings{},
		InFlight: map[string]*proxy.Limiter{},
		RetrySafe: func(t *upstreams.Tool) bool {
			safe, explicit := cfg.ToolRetrySafe(t.Server, t.Upstream)
			return breaker.RetrySafe(explicit, safe, cfg.Trusted(t.Server), t.Annotations.ReadOnlyHint, t.Annotations.IdempotentHint)
		},
	}
	for _, server := range cfg.ServerNames() {
		r.Retry[server] = retryFrom(cfg, server)
		r.InFlight[server] = proxy.NewLimiter(cfg.MaxInFlight(server))
	}
	return r
}

// dedupFrom builds duplicate suppression (limits.dedup): in this process,
// and across replicas too when there is a shared store (state.redis).
func dedupFrom(cfg *config.Config, store *state.Client) *proxy.Dedup {
	d := &proxy.Dedup{
		Table:        dedup.NewTable[proxy.Recorded](cfg.DedupMaxEntries(), time.Now),
		Window:       cfg.DedupWindow(),
		KeyWindow:    cfg.DedupKeyWindow(),
		RetrySafeToo: cfg.DedupIncludeRetrySafe(),
	}
	if store != nil {
		d.Shared, d.SharedFailOpen = dedupredis.New(store), cfg.DedupFailOpen()
	}
	return d
}

// openPins opens the tool-pin lock file in the configured mode; opts are
// for read-only use by offline commands.
func openPins(cfg *config.Config, opts ...pins.Option) (*pins.Store, error) {
	mode, err := pins.ParseMode(cfg.PinningMode())
	if err != nil {
		return nil, err
	}
	return pins.Open(cfg.PinsPath(), mode, opts...)
}

// watchPolicy reloads the policy when its files change, and the tool pins
// when an admin approves a tool, and both on SIGHUP, until ctx ends. A
// failed reload keeps the last good policy (authz.Store logs and counts it).
func watchPolicy(ctx context.Context, gw *gateway, log *slog.Logger) {
	go func() {
		if err := gw.policy.Watch(ctx); err != nil && ctx.Err() == nil {
			log.Error("policy files are not watched; SIGHUP still reloads", "err", err)
		}
	}()
	go func() {
		if err := gw.set.WatchPins(ctx); err != nil && ctx.Err() == nil {
			log.Error("the tool pin file is not watched; SIGHUP still reloads it", "err", err)
		}
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the policy and the tool pins")
				_ = gw.policy.Reload()
				if err := gw.set.ReloadPins(); err != nil {
					log.Error("tool pins not reloaded", "err", err)
				}
			}
		}
	}()
}

func serveStdio(ctx context.Context, gw *gateway, log *slog.Logger) int {
	subject := authz.Subject{Principal: gw.cfg.StdioPrincipal()}
	log.Info("serving stdio", "principal", subject.Principal)
	if err := gw.server.ServeStdio(ctx, subject, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stdio server stopped", "err", err)
		return 1
	}
	return 0
}

// serveAdmin starts the admin listener, loopback by default: health probes
// always; metrics and the approvals API only with an admin key configured.
func serveAdmin(gw *gateway, log *slog.Logger, errc chan<- error) (*http.Server, error) {
	if gw.cfg.AdminKeySHA256() == "" {
		log.Info("no admin.key_sha256: the admin listener serves /healthz and /readyz only (no metrics, approvals cannot be decided)")
	}
	ln, err := net.Listen("tcp", gw.cfg.AdminAddr())
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: adminHandler(gw, log), ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving the admin API", "url", "http://"+ln.Addr().String())
	go func() { errc <- srv.Serve(ln) }()
	return srv, nil
}

// httpOptions resolves the HTTP endpoint's settings from config.
func httpOptions(gw *gateway, log *slog.Logger) proxy.HTTPOptions {
	if anonymous := gw.cfg.Auth.AllowAnonymous; anonymous != "" {
		log.Warn("unauthenticated HTTP access is enabled", "principal", anonymous)
	}
	return proxy.HTTPOptions{
		Auth:     gw.auth,
		Metadata: gw.auth.ProtectedResourceMetadata(), MetadataPaths: gw.auth.MetadataPaths(),
		MaxBodyBytes: gw.cfg.MaxBodyBytes(), SessionIdleTTL: gw.cfg.SessionIdleTTL(),
		AllowedOrigins: gw.cfg.Listen.AllowedOrigins, NoFastPath: !gw.cfg.HTTPFastPath(), Log: log,
	}
}

func serveHTTP(ctx context.Context, gw *gateway, log *slog.Logger) int {
	endpoint := gw.server.HTTPHandler(httpOptions(gw, log))
	ln, err := net.Listen("tcp", gw.cfg.HTTPAddr())
	if err != nil {
		log.Error("cannot listen", "addr", gw.cfg.HTTPAddr(), "err", err)
		return 1
	}
	srv := &http.Server{Handler: endpoint, ReadHeaderTimeout: 10 * time.Second}
	// Open GET streams would keep Shutdown waiting for the whole grace
	// period: end the MCP sessions as soon as shutdown starts.
	srv.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = endpoint.Shutdown(ctx)
	})
	log.Info("serving Streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	admin, err := serveAdmin(gw, log, errc)
	if err != nil {
		log.Error("cannot listen for the admin API", "addr", gw.cfg.AdminAddr(), "err", err)
		_ = srv.Close()
		return 1
	}
	if admin != nil {
		defer admin.Close()
	}
	select {
	case err := <-errc:
		log.Error("HTTP server stopped", "err", err)
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("in-flight calls cut at shutdown", "err", err)
	}
	return 0
}
