package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/upstreams"
)

// observe connects the gateway's parts to its metrics and readiness checks:
// every callback that reports a state change also updates its gauge, and
// the current state is published once at startup (the callbacks only report
// changes).
func (g *Gateway) observe() {
	m := g.metrics
	// wasUp is each server's last known status, for the restart counter. It
	// starts from the status published here: a server up at boot reports no
	// change before its first exit, and that exit is a restart too.
	var wasUp sync.Map
	for _, server := range g.cfg.ServerNames() {
		m.BreakerState(server, "closed")
		up, _ := g.set.Status(server)
		m.UpstreamUp(server, up)
		wasUp.Store(server, up)
	}
	g.breakers.OnStateChange(m.BreakerState)
	// A server back up (initialize and tools/list answered): an open breaker
	// probes it now instead of refusing it until open_for ends.
	g.set.OnStatusChange(func(server string, up bool, _ string) {
		if up {
			g.breakers.Reconnected(server)
		}
	})
	g.set.OnStatusChange(func(server string, up bool, _ string) {
		m.UpstreamUp(server, up)
		if prev, _ := wasUp.Swap(server, up); prev == true && !up {
			m.UpstreamRestart(server)
		}
	})
	m.CatalogSize(len(g.set.Catalog().Tools()))
	g.set.OnCatalogChange(func(cat *upstreams.Catalog) { m.CatalogSize(len(cat.Tools())) })
	// Set before anything can reload the policy (Watch, SIGHUP and the shared store start later).
	g.policy.RefuseDenyRemoval(g.cfg.RefuseDenyRemoval())
	m.PolicyInfo(g.policy.Current().Version())
	m.PolicyDenyLines(g.policy.Current().Denies())
	g.policy.OnReloadEvent(func(ev authz.ReloadEvent) {
		m.PolicyReload(ev.Err == nil)
		m.PolicyInfo(ev.Policy.Version())
		m.PolicyDenyLines(ev.Policy.Denies())
		if len(ev.RemovedDenies) > 0 {
			m.PolicyDenyRemoval(ev.Applied())
		}
	})
	g.health.AddReadiness("policy", func() error {
		if g.policy.Current() == nil {
			return errors.New("no policy loaded")
		}
		return nil
	})
	if g.audit != nil {
		g.health.AddReadiness("audit", func() error {
			if g.audit.Err() != nil {
				return errors.New("the audit trail cannot be written")
			}
			return nil
		})
	}
	g.stateReadiness()
	for _, server := range g.cfg.RequiredServers() {
		g.health.AddReadiness("upstream/"+server, func() error {
			if up, _ := g.set.Status(server); !up {
				return errors.New("not connected")
			}
			return nil
		})
	}
}

// AdminHandler is the admin listener: /healthz and /readyz for probes
// (no credential: they say only whether the gateway is alive and ready,
// and which check fails), and, with the admin key, /metrics, the policy in
// force and the approvals API.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", g.health.Healthz())
	mux.Handle("GET /readyz", g.health.Readyz())
	scrape := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Approvals expire lazily: count them when asked. A store that cannot be read leaves the gauge
		// as it was (its failures are counted on their own), never drops it to zero.
		if pending, err := g.approvals.List(approvals.StatePending); err == nil {
			g.metrics.ApprovalsPending(len(pending))
		}
		g.metrics.Handler().ServeHTTP(w, r)
	})
	// Everything behind the admin key is built for the key in force, and built again when a reload
	// changes it (ReloadKeys): a request checks against the key in force when it arrives.
	build := func(key string) http.Handler {
		keyed := http.NewServeMux()
		keyed.Handle("GET /metrics", approvals.RequireAdminKey(key, g.log, scrape))
		keyed.Handle("GET /v1/policy", approvals.RequireAdminKey(key, g.log, policyHandler(g)))
		creds := g.credentialsAdmin(key)
		keyed.Handle("/v1/credentials", creds)
		keyed.Handle("/v1/credentials/", creds)
		keyed.Handle("GET /v1/connect-link", approvals.RequireAdminKey(key, g.log, g.connectLinkHandler()))
		keyed.Handle("/", approvals.Handler(g.approvals, key, g.log))
		return keyed
	}
	type keyedRoutes struct {
		key string
		h   http.Handler
	}
	var routes atomic.Pointer[keyedRoutes]
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := g.adminKeySHA256()
		cur := routes.Load()
		if cur == nil || cur.key != key {
			cur = &keyedRoutes{key: key, h: build(key)}
			routes.Store(cur)
		}
		cur.h.ServeHTTP(w, r)
	}))
	return mux
}

// PolicyInfo is GET /v1/policy: the policy this replica runs, so an
// operator (or a test) can check that replicas converged after a reload.
type PolicyInfo struct {
	Version  string    `json:"version"`
	Rules    int       `json:"rules"`
	LoadedAt time.Time `json:"loaded_at"` // when the policy in force was swapped in
	Replica  string    `json:"replica"`
}

func policyHandler(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := g.policy.Stats()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(PolicyInfo{Version: st.Version, Rules: st.Rules, LoadedAt: st.LastSuccessAt.UTC(), Replica: g.replica})
	})
}
