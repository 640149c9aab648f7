package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
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
	m, gw := g.metrics, g
	for _, server := range gw.cfg.ServerNames() {
		m.BreakerState(server, "closed")
		up, _ := gw.set.Status(server)
		m.UpstreamUp(server, up)
	}
	g.breakers.OnStateChange(m.BreakerState)
	var wasUp sync.Map
	gw.set.OnStatusChange(func(server string, up bool, _ string) {
		m.UpstreamUp(server, up)
		if prev, _ := wasUp.Swap(server, up); prev == true && !up {
			m.UpstreamRestart(server)
		}
	})
	m.CatalogSize(len(gw.set.Catalog().Tools()))
	gw.set.OnCatalogChange(func(cat *upstreams.Catalog) { m.CatalogSize(len(cat.Tools())) })
	m.PolicyInfo(gw.policy.Current().Version())
	gw.policy.OnReload(func(p *authz.Policy, err error) {
		m.PolicyReload(err == nil)
		m.PolicyInfo(p.Version())
	})
	gw.health.AddReadiness("policy", func() error {
		if gw.policy.Current() == nil {
			return errors.New("no policy loaded")
		}
		return nil
	})
	if gw.audit != nil {
		gw.health.AddReadiness("audit", func() error {
			if gw.audit.Err() != nil {
				return errors.New("the audit trail cannot be written")
			}
			return nil
		})
	}
	g.stateReadiness()
	for _, server := range gw.cfg.RequiredServers() {
		gw.health.AddReadiness("upstream/"+server, func() error {
			if up, _ := gw.set.Status(server); !up {
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
	gw, log := g, g.log
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", gw.health.Healthz())
	mux.Handle("GET /readyz", gw.health.Readyz())
	scrape := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Approvals expire lazily: count them when asked.
		gw.metrics.ApprovalsPending(len(gw.approvals.List(approvals.StatePending)))
		gw.metrics.Handler().ServeHTTP(w, r)
	})
	mux.Handle("GET /metrics", approvals.RequireAdminKey(gw.cfg.AdminKeySHA256(), log, scrape))
	mux.Handle("GET /v1/policy", approvals.RequireAdminKey(gw.cfg.AdminKeySHA256(), log, policyHandler(gw)))
	mux.Handle("/", approvals.Handler(gw.approvals, gw.cfg.AdminKeySHA256(), log))
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

func policyHandler(gw *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := gw.policy.Stats()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(PolicyInfo{Version: st.Version, Rules: st.Rules, LoadedAt: st.LastSuccessAt.UTC(), Replica: gw.replica})
	})
}
