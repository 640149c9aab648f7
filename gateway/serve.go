package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/console"
	consoleredis "github.com/toolgate/toolgate/console/redisstore"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/upstreams"
)

// shutdownGrace is how long in-flight HTTP calls may run once Close begins.
const shutdownGrace = 10 * time.Second

// Start serves Streamable HTTP on listen.http (/mcp) and the admin
// listener on admin.listen, and watches the policy and pin files until ctx
// ends. It returns once both listeners are open; Failed reports a listener
// that stops on its own, and Close shuts both down.
func (g *Gateway) Start(ctx context.Context) error {
	g.Watch(ctx)
	g.serving.failed = make(chan error, 2)
	ln, err := net.Listen("tcp", g.cfg.HTTPAddr())
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", g.cfg.HTTPAddr(), err)
	}
	endpoint := g.MCPHandler()
	g.serving.endpoint = endpoint
	g.SetConnectBaseURL("http://" + ln.Addr().String())
	g.serving.http = g.serve(ln, g.WithConnectPages(endpoint))
	g.log.Info("serving Streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	if g.cfg.AdminKeySHA256() == "" {
		g.log.Info("no admin.key_sha256: the admin listener serves /healthz and /readyz only (no metrics, approvals cannot be decided) until a reload of the config file sets one")
	}
	admin, err := g.AdminListenerHandler()
	if err != nil {
		g.serving.stop(g.log)
		return err
	}
	aln, err := net.Listen("tcp", g.cfg.AdminAddr())
	if err != nil {
		g.serving.stop(g.log) // nothing is served unless everything is
		return fmt.Errorf("cannot listen for the admin API on %s: %w", g.cfg.AdminAddr(), err)
	}
	g.serving.admin = g.serve(aln, admin)
	g.log.Info("serving the admin API", "url", "http://"+aln.Addr().String())
	if g.cfg.ConsoleEnabled() {
		g.log.Info("serving the approvals console", "url", "http://"+aln.Addr().String()+console.Prefix, "approvers", len(g.cfg.ConsoleApprovers()))
	}
	return nil
}

// AdminListenerHandler is what the admin listener serves: AdminHandler, and in front of it the
// approvals console (console/) at /ui/ when console.approvers is set. The console has its own
// sign-in; deciding there goes through the same approvals store, and so into the audit trail.
func (g *Gateway) AdminListenerHandler() (http.Handler, error) {
	admin := g.AdminHandler()
	if !g.cfg.ConsoleEnabled() {
		return admin, nil
	}
	o := ConsoleOptions(g.cfg)
	o.Store, o.Policy, o.Log = g.approvals, g.policy.Current, g.log
	o.Pages = g.consolePages()
	if g.state != nil {
		o.Sessions = consoleredis.New(g.state) // a sign-in on one replica is one on all
	}
	c, err := console.New(o)
	if err != nil {
		return nil, err
	}
	g.console.Store(c) // ReloadKeys swaps its approvers
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, c)
	mux.Handle("/", admin)
	return mux, nil
}

// Failed receives the error of a listener that stopped on its own.
func (g *Gateway) Failed() <-chan error { return g.serving.failed }

// Addr is where Start serves MCP; AdminAddr the admin listener ("" before
// Start).
func (g *Gateway) Addr() string      { return g.serving.addr(g.serving.http) }
func (g *Gateway) AdminAddr() string { return g.serving.addr(g.serving.admin) }

func (g *Gateway) serve(ln net.Listener, h http.Handler) *listening {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)} // net/http's complaints among our lines, not raw stderr
	l := &listening{srv: srv, addr: ln.Addr().String()}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			g.serving.failed <- err
		}
	}()
	return l
}

// ServeStdio serves one client on in and out as the principal
// auth.stdio_principal names, watching the policy and pin files, until
// the client goes or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	g.Watch(ctx)
	subject := authz.Subject{Principal: g.cfg.StdioPrincipal()}
	g.log.Info("serving stdio", "principal", subject.Principal)
	err := g.server.ServeStdio(ctx, subject, in, out)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Watch reloads the policy when its files change, the API keys and the
// admin key when the config file changes (ReloadKeys), and the tool pins
// when an admin approves a tool, until ctx ends or Close. A failed reload
// keeps the last good policy (authz.Store logs and counts it), or the last
// good keys.
func (g *Gateway) Watch(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	var watching sync.WaitGroup
	g.cleanup.add(func() { cancel(); watching.Wait() }) // released first: nothing reloads what Close is closing
	watching.Go(func() {
		if err := g.policy.Watch(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("policy files are not watched; SIGHUP still reloads", "err", err)
		}
	})
	watching.Go(func() { g.watchShadow(ctx) })
	watching.Go(func() {
		if err := g.watchConfig(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("the config file is not watched; SIGHUP still reloads the API keys", "err", err)
		}
	})
	watching.Go(func() {
		if err := g.set.WatchPins(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("the tool pin file is not watched; SIGHUP still reloads it", "err", err)
		}
	})
}

// Reload reads the policy, the tool pins, and the API keys and admin key
// of the config file again (SIGHUP). Each failure is logged by its part,
// which keeps what it had.
func (g *Gateway) Reload() {
	_ = g.policy.Reload()
	g.reloadShadow()
	if err := g.set.ReloadPins(); err != nil {
		g.log.Error("tool pins not reloaded", "err", err)
	}
	_ = g.ReloadKeys()
}

// HTTPOptions are the MCP endpoint's settings from config.
func (g *Gateway) HTTPOptions() proxy.HTTPOptions {
	if anonymous := g.cfg.Auth.AllowAnonymous; anonymous != "" {
		g.log.Warn("unauthenticated HTTP access is enabled", "principal", anonymous)
	}
	return proxy.HTTPOptions{
		Auth:     g.auth,
		Metadata: g.auth.ProtectedResourceMetadata(), MetadataPaths: g.auth.MetadataPaths(),
		MaxBodyBytes: g.cfg.MaxBodyBytes(), SessionIdleTTL: g.cfg.SessionIdleTTL(),
		AllowedOrigins: g.cfg.Listen.AllowedOrigins, NoFastPath: !g.cfg.HTTPFastPath(), Log: g.log,
		SharedSessions: g.SharedSessions(),
		ScopeChallenge: func(w http.ResponseWriter, scopes []string) { g.auth.InsufficientScope(scopes).Respond(w) },
	}
}

// MCPHandler is the Streamable HTTP endpoint, for a server of the caller's
// (Start serves one itself).
func (g *Gateway) MCPHandler() *proxy.HTTPEndpoint { return g.server.HTTPHandler(g.HTTPOptions()) }

// The gateway's parts, for commands and end-to-end tests.
func (g *Gateway) Config() *config.Config     { return g.cfg }
func (g *Gateway) Policy() *authz.Store       { return g.policy }
func (g *Gateway) Upstreams() *upstreams.Set  { return g.set }
func (g *Gateway) Approvals() approvals.Store { return g.approvals }
func (g *Gateway) Audit() *audit.Log          { return g.audit }
func (g *Gateway) Server() *proxy.Server      { return g.server }
func (g *Gateway) Replica() string            { return g.replica }

// serving is what Start opened.
type serving struct {
	endpoint *proxy.HTTPEndpoint
	http     *listening
	admin    *listening
	failed   chan error
}

type listening struct {
	srv  *http.Server
	addr string
}

func (s *serving) addr(l *listening) string {
	if l == nil {
		return ""
	}
	return l.addr
}

// stop shuts the listeners down: the MCP sessions end at once (open GET
// streams would otherwise keep Shutdown waiting for the whole grace
// period), in-flight calls get shutdownGrace.
func (s *serving) stop(log *slog.Logger) {
	if s.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	s.http.srv.RegisterOnShutdown(func() { _ = s.endpoint.Shutdown(ctx) })
	log.Info("shutting down", "grace", shutdownGrace)
	if err := s.http.srv.Shutdown(ctx); err != nil {
		log.Warn("in-flight calls cut at shutdown", "err", err)
	}
	if s.admin != nil {
		_ = s.admin.srv.Close()
	}
	s.http, s.admin = nil, nil
}
