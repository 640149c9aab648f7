package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/authz/shadow"
)

// openShadow loads authz.shadow_policy, when set, into a Store of its own on the live model and
// the live policy's options: a candidate that would not load as the live policy does not start.
// Its problems are the live policy's (file:line, what to write instead).
func (g *Gateway) openShadow() error {
	path := g.cfg.ShadowPolicyPath()
	if path == "" {
		return nil
	}
	s, err := authz.NewStore(g.cfg.ModelPath(), path, PolicyOptions(g.cfg), g.log.With("policy_role", "shadow"))
	if err != nil {
		return fmt.Errorf("%s: authz.shadow_policy: expected a candidate policy that loads with %s like authz.policy:\n%w", g.cfg.File, g.cfg.ModelPath(), err)
	}
	g.shadow = s
	g.log.Info("shadow policy loaded: it is evaluated beside the live policy on every call and decides nothing",
		"shadow_policy", path, "version", s.Current().Version())
	return nil
}

// shadowGuard is the shadow link's guard: nil (every call passes untouched) without a shadow.
func (g *Gateway) shadowGuard() *shadow.Guard {
	if g.shadow == nil {
		return nil
	}
	src := &shadowSource{live: g.policy, shadow: g.shadow, log: g.log}
	return &shadow.Guard{Policy: src.current, Metrics: g.metrics, Log: g.log}
}

// shadowSource hands the shadow link the shadow policy in force, with the live policy's configured
// principals: a key reload tells the live Store the principals of the new config
// (Store.SetPrincipals), and a shadow that kept the old ones would take a new key's principal that
// only p lines name for a role, and deny it, a disagreement that no edit of the candidate causes.
// The check costs a pointer comparison per call; the principals are compared only when the live
// policy in force changed.
type shadowSource struct {
	live, shadow *authz.Store
	log          *slog.Logger
	seen         atomic.Pointer[authz.Policy] // the live policy whose principals the shadow has
}

func (s *shadowSource) current() *authz.Policy {
	if lp := s.live.Current(); s.seen.Load() != lp {
		s.seen.Store(lp)
		if want := lp.Principals(); !slices.Equal(want, s.shadow.Current().Principals()) {
			if _, _, err := s.shadow.SetPrincipals(want); err != nil {
				s.log.Warn("the shadow policy keeps its principals: it gives a configured principal as a role", "err", err)
			}
		}
	}
	return s.shadow.Current()
}

// watchShadow reloads the shadow policy when its file (or the model) changes, until ctx ends.
func (g *Gateway) watchShadow(ctx context.Context) {
	if g.shadow == nil {
		return
	}
	if err := g.shadow.Watch(ctx); err != nil && ctx.Err() == nil {
		g.log.Error("the shadow policy file is not watched; SIGHUP still reloads it", "err", err)
	}
}

// reloadShadow reads the shadow policy again (SIGHUP); a broken file keeps the last good one.
func (g *Gateway) reloadShadow() {
	if g.shadow != nil {
		_ = g.shadow.Reload() // logged and counted by the Store
	}
}

// Shadow is the shadow policy's Store, nil without authz.shadow_policy.
func (g *Gateway) Shadow() *authz.Store { return g.shadow }
