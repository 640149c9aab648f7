package gateway

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/webhook"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// Options say where the gateway's configuration is and how it reports.
// ConfigPath is required.
type Options struct {
	ConfigPath string
	Log        *slog.Logger // default: discard
	Version    string       // reported to clients in initialize
	// Tracing builds the tracer; default tracing.Setup, which reads the
	// standard OTEL_* variables. Tests pass an in-memory exporter.
	Tracing func(ctx context.Context, version string) (*tracing.Tracing, error)
	// Egress supplies the Resolver and Dial of every upstream's and
	// approval webhook's egress guard (its other fields are ignored:
	// egress.allow is the config's);
	// zero: the system resolver and dialer. Tests give host names the
	// addresses they need without DNS.
	Egress egress.Options
	// CredentialClock is the clock of the upstreams' token sources (token
	// lifetimes, the holdoff after a failed token request); nil: time.Now.
	// Tests move it past a holdoff instead of sleeping through it.
	CredentialClock func() time.Time
}

// Gateway is one toolgate: its configuration loaded and checked, its
// upstreams connected, the chain every tools/call runs through, and the
// MCP server clients talk to. New builds it, Start serves it, Close
// releases everything it holds, in the reverse of the order it was built.
type Gateway struct {
	cfg       *config.Config
	log       *slog.Logger
	policy    *authz.Store
	shadow    *authz.Store // authz.shadow_policy, nil without one (shadow.go)
	auth      *authn.Authenticator
	approvals approvals.Store                 // the file, or Redis with state.redis; decisions bound to the policy in force
	notify    *webhook.Notifier               // approvals.rules' webhooks
	console   atomic.Pointer[console.Console] // the console AdminListenerHandler built, if any
	set       *upstreams.Set
	breakers  *breaker.Set
	chain     *pipeline.Chain
	server    *proxy.Server
	metrics   *metrics.Metrics
	health    *metrics.Health
	audit     *audit.Log // nil when audit.disabled
	tracing   *tracing.Tracing
	state     *state.Client // nil unless state.redis: the store replicas share
	replica   string        // this process among the replicas
	version   string
	pins      *pins.Store
	redact    *redact.Redactor // nil with redaction.disabled
	keys      liveKeys         // the admin key in force and the reload counts; the API keys are in auth
	vault     *vault.Encrypted // nil unless an upstream keeps credentials per user (per_user, oauth)
	// connectURL is the page where a user connects to an upstream that acts as them; nil: none, the
	// operator sets credentials (toolgate credentials set).
	connectURL func(principal, upstream string) string
	credClock  func() time.Time // Options.CredentialClock
	userAuth   *userAuth        // the connect pages and the auth mode oauth upstreams' sources (connect.go)

	// For the console's upstreams page (console.go): the in-flight limits, the upstreams' status
	// history, and the lock that makes pin approvals one at a time.
	inFlight     map[string]*pipeline.Limiter
	history      *upstreamHistory
	pinApprovals sync.Mutex
	// consolePinned holds "<id> <hash>" of definitions approved in the console until the catalog
	// shows them callable, so that pinApprovalRecorder does not record them a second time.
	consolePinned sync.Map

	cleanup cleanup
	serving serving // the listeners Start opened
}

// StartError is why New could not build the gateway: What names the part
// (the heading an operator reads), Err every problem found in it, one per
// line with file, line and key where known.
type StartError struct {
	What string
	Err  error
}

func (e *StartError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// New loads and validates everything, failing fast with precise messages,
// then connects the upstreams. On failure it has released whatever it had
// opened, and the error is a *StartError.
func New(ctx context.Context, o Options) (*Gateway, error) {
	g := &Gateway{log: o.Log, version: o.Version, replica: replicaID(), health: &metrics.Health{}, credClock: o.CredentialClock}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, step := range g.steps(o) {
		if err := step.run(ctx); err != nil {
			g.cleanup.run()
			return nil, &StartError{What: step.what, Err: err}
		}
	}
	g.wire()
	g.log.Info("toolgate ready", "config", g.cfg.File, "tools", len(g.set.Catalog().Tools()), "policy", g.policy.Current().Version(),
		"replica", g.replica, "shared_state", g.state != nil)
	return g, nil
}

// step is one part New builds; what is the heading of its errors.
type step struct {
	what string
	run  func(ctx context.Context) error
}

// steps are the parts in the order New builds them: the checks that need
// nothing started first, so that a mistake in a file costs no process
// start; then what Close must release after the upstreams (Close runs the
// cleanup stack backwards: the upstreams first, so that calls still
// running end and record their outcome, then the shared store, whose
// announcements reload the policy, which is audited, then the audit trail
// and the tracer, which gets the last spans out).
func (g *Gateway) steps(o Options) []step {
	setupTracing := o.Tracing
	if setupTracing == nil {
		setupTracing = tracing.Setup
	}
	return []step{
		{"invalid configuration", func(context.Context) (err error) {
			g.cfg, err = config.Load(o.ConfigPath)
			return err
		}},
		{"invalid policy", func(context.Context) (err error) {
			g.policy, err = authz.NewStore(g.cfg.ModelPath(), g.cfg.PolicyPath(), PolicyOptions(g.cfg), g.log)
			return err
		}},
		{"invalid shadow policy", func(context.Context) error { return g.openShadow() }},
		// Tracing is off unless the standard OTEL_* variables turn it on; a
		// setting it cannot honour (an unsupported exporter or protocol) is
		// a startup error rather than traces silently lost.
		{"invalid OpenTelemetry settings", func(ctx context.Context) (err error) {
			g.metrics = metrics.New()
			if g.tracing, err = setupTracing(ctx, o.Version); err == nil {
				g.cleanup.add(func() { g.shutdownTracing() })
			}
			return err
		}},
		{"invalid redaction patterns", func(context.Context) (err error) {
			g.redact, err = newRedactor(g.cfg, g.metrics)
			return err
		}},
		{"cannot open the audit trail", func(context.Context) (err error) {
			if g.audit, err = openAudit(g.cfg, g.metrics, g.log); err == nil && g.audit != nil {
				g.cleanup.add(func() { _ = g.audit.Close() })
			}
			return err
		}},
		{"invalid authentication settings", func(ctx context.Context) (err error) {
			if g.auth, err = authn.New(ctx, AuthnOptions(g.cfg), g.log); err == nil {
				g.cleanup.add(g.auth.Close)
				admin := g.cfg.AdminKeySHA256()
				g.keys.adminKey.Store(&admin) // ReloadKeys changes both
			}
			return err
		}},
		{"invalid state settings", func(context.Context) (err error) {
			if g.state, err = openState(g.cfg, g.metrics, g.log); err == nil && g.state != nil {
				g.cleanup.add(g.state.Close)
			}
			return err
		}},
		{"invalid approvals file", func(context.Context) (err error) {
			g.approvals, err = openApprovals(g.cfg, g.state)
			if err == nil {
				g.approvals = approvals.Bound(g.approvals, func() approvals.RuleFinder { return g.policy.Current() })
				g.notify = webhook.New(WebhookOptions(g.cfg, g.log, g.metrics, g.redact, o.Egress))
				g.cleanup.add(g.notify.Close)
			}
			return err
		}},
		{"cannot open the credential store", func(context.Context) error { return g.openVault() }},
		{"invalid tool pins", func(context.Context) (err error) {
			g.pins, err = OpenPins(g.cfg)
			return err
		}},
		{"invalid upstream credential settings", func(context.Context) error { return g.openUserAuth(o.Egress) }},
		{"cannot build the tool catalog", func(ctx context.Context) (err error) {
			servers := g.withUserCredentials(upstreamServers(g.cfg, g.credentialDeps(), o.Egress, g.redact, g.metrics))
			if g.set, err = upstreams.Start(ctx, servers, g.log, upstreams.WithPins(g.pins)); err == nil {
				g.cleanup.add(g.set.Close)
			}
			return err
		}},
	}
}

// wire builds the chain and the MCP server on the parts, and connects the
// parts to each other: catalog changes to the client-facing tools, policy
// reloads to list_changed, everything to metrics, readiness and audit.
func (g *Gateway) wire() {
	g.breakers = breaker.NewSet(breakerSettingsFrom(g.cfg), g.log)
	g.chain = Chain(pipeline.Options{Policy: func() pipeline.Policy { return g.policy.Current() }, Metrics: g.metrics, Tracing: g.tracing},
		g.links())
	g.server = proxy.NewServer(proxy.Options{Calls: g.chain, Catalog: g.set.Catalog,
		Policy: func() proxy.Policy { return g.policy.Current() }, Metrics: g.metrics, Redact: g.redact, Toolsets: ToolsetsFrom(g.cfg),
		NoStdioFastPath: !g.cfg.HTTPFastPath()}, g.version, g.log)
	g.server.SetFeatureRelay(proxy.FeatureRelay{Upstreams: g.set, Timeout: func(server string) time.Duration { return g.cfg.CallTimeout(server, "") }})
	g.set.OnResourceUpdated(g.server.ResourceUpdated)
	g.set.OnStatusChange(func(server string, up bool, _ string) {
		if up {
			g.server.Resubscribe(server)
		}
	})
	g.policy.Subscribe(func(old, next *authz.Policy) { g.server.PolicyChanged(old, next) })
	// The metadata's scopes_supported are the scopes the policy's scope
	// lines name, whichever policy is in force (docs/policy.md, "Scopes").
	g.auth.SetScopesSupported(g.policy.Current().ScopesNamed())
	g.policy.Subscribe(func(_, next *authz.Policy) { g.auth.SetScopesSupported(next.ScopesNamed()) })
	// Restarts, reconnects and upstream list changes rebuild the catalog;
	// the client-facing tools follow (mcp-go sends tools/list_changed).
	g.set.OnCatalogChange(g.server.SyncTools)
	g.observe()
	g.history = watchUpstreams(g.set, g.cfg.ServerNames(), time.Now)
	g.shareBreakers()
	g.auditDecisions()
	g.syncPolicy()
}

// links are the chain's parts, built on the gateway's.
func (g *Gateway) links() Links {
	recorder := &pipeline.Recorder{Log: g.log, Metrics: g.metrics}
	if g.audit != nil {
		recorder.Audit = g.audit // (a nil *audit.Log in the interface would not be nil)
	}
	resilience := resilienceFrom(g.cfg, g.breakers)
	g.inFlight = resilience.InFlight
	return Links{
		Record: recorder, Catalog: g.set.Catalog, RetrySafe: retrySafe(g.cfg), Arguments: argumentLimits(g.cfg),
		Shadow:     g.shadowGuard(),
		RateLimits: rateLimitsFrom(g.cfg, g.state, g.log),
		Approvals:  &approvals.Guard{Store: g.approvals, Log: g.log, Rules: ApprovalRules(g.cfg), OnCreated: g.notify.Created},
		Dedup:      dedupFrom(g.cfg, g.state, g.metrics, g.log),
		Execute:    &pipeline.Executor{Upstreams: g.set, Resilience: resilience, Metrics: g.metrics, Tracing: g.tracing, Redact: g.redact},
		Redact:     g.redact,
	}
}

// Close releases everything New and Start opened: the listeners first
// (in-flight HTTP calls get shutdownGrace to finish), then the 2026-07-28
// calls still running, parked for input their clients never gave (they
// are cancelled and waited for, within shutdownGrace, while the upstreams
// and the audit trail that record their end are still open), then the
// parts in the reverse of the order they were built.
func (g *Gateway) Close() {
	g.serving.stop(g.log)
	if g.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		if err := g.server.Shutdown(ctx); err != nil {
			g.log.Warn("calls cut at shutdown", "err", err)
		}
		cancel()
	}
	g.cleanup.run()
}

func (g *Gateway) shutdownTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = g.tracing.Shutdown(ctx) // the last spans get out
}

// cleanup is a stack of releases: run calls them last added first, once.
type cleanup []func()

func (c *cleanup) add(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}
