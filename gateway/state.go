package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/toolgate/toolgate/approvals"
	approvalsredis "github.com/toolgate/toolgate/approvals/redisstore"
	"github.com/toolgate/toolgate/authz"
	policyredis "github.com/toolgate/toolgate/authz/redisstore"
	breakerredis "github.com/toolgate/toolgate/breaker/redisstore"
	"github.com/toolgate/toolgate/config"
	consoleredis "github.com/toolgate/toolgate/console/redisstore"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/proxy/sessionids"
	sessionsredis "github.com/toolgate/toolgate/proxy/sessionids/redisstore"
	"github.com/toolgate/toolgate/state"
)

// openState connects to the shared store when state.redis is configured
// (nil, nil otherwise: the embedded default). Its health feeds the metrics
// from the first PING on. A store that is down does not stop the gateway:
// it starts, reports itself not ready, and recovers when the store returns.
func openState(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*state.Client, error) {
	if !cfg.StateShared() {
		return nil, nil
	}
	m.StateFeatures(state.Features...)
	m.StateFeatures(state.FeatureDedup, state.FeatureApprovals, sessionsredis.Feature, consoleredis.Feature)
	return state.Open(state.Options{
		URL: cfg.StateRedisURL(), KeyPrefix: cfg.StateKeyPrefix(),
		DialTimeout: cfg.StateDialTimeout(), OpTimeout: cfg.StateOpTimeout(),
		Log: log.With("component", "state"), OnStatus: m.StateUp, OnError: m.StateError,
	})
}

// openApprovals opens the approval store: in Redis when there is a shared
// store, so that an approval given through any replica is consumed through
// any other, once (it always fails closed: state.approvals_on_failure
// accepts only closed); else the approvals file, the embedded store.
func openApprovals(cfg *config.Config, store *state.Client) (approvals.Store, error) {
	if store != nil {
		return approvalsredis.New(store, cfg.ApprovalTTL()), nil
	}
	s, err := approvals.Open(cfg.ApprovalsPath(), cfg.ApprovalTTL(), time.Now)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// syncPolicy keeps the policy in step with the other replicas: a swap here
// is announced, and another replica's announcement makes this one re-read
// its files. Reloads it causes are logged, counted and audited like any.
func (g *Gateway) syncPolicy() {
	if g.state == nil {
		return
	}
	ps := policyredis.New(g.state, g.replica, func() string { return g.policy.Current().Version() }, g.policy.Reload)
	g.policy.Subscribe(func(_, next *authz.Policy) { ps.Announce(next.Version()) })
	ps.Start()
}

// stateReadiness fails /readyz while the shared store does not answer: a
// replica that cannot share its limits should not take traffic when others
// can. The message says nothing of the server's address.
func (g *Gateway) stateReadiness() {
	if g.state == nil {
		return
	}
	g.health.AddReadiness("state", func() error {
		if g.state.Err() != nil {
			return errors.New("the shared state store (Redis) is unreachable")
		}
		return nil
	})
}

// replicaID names this process among the replicas, in announcements, logs
// and GET /v1/policy: the host, the process, and a random part, since
// several gateways may run in one process (tests) or reuse a PID.
func replicaID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// shareBreakers shares circuit breaker openings with the other replicas
// when there is a shared store (state.redis): an upstream's breaker opened
// by failures seen here is forced open on every other replica for the rest
// of its open_for, and theirs here. Each replica still counts only its own
// calls' outcomes, and nothing shared is on a call's path (breaker/shared.go
// and breaker/redisstore say why). Without the store, or while it is down,
// each replica's breakers decide alone.
func (g *Gateway) shareBreakers() {
	if g.state == nil {
		return
	}
	sync := breakerredis.New(g.state, g.replica, g.cfg.ServerNames(), g.breakers.ForceOpen)
	g.breakers.OnOpen(sync.Opened)
	sync.Start()
}

// SharedSessions is where the replicas share the sessions clients ended
// (DELETE), for proxy.HTTPOptions.SharedSessions: in the shared store when
// there is one, so that every replica refuses them; nil without it (each
// replica refuses the sessions ended through it). Each call is a store of
// its own, following the store's announcements until the gateway closes.
func (g *Gateway) SharedSessions() sessionids.Shared {
	if g.state == nil {
		return nil
	}
	return sessionsredis.New(g.state)
}
