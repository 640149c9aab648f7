// Package shadow evaluates a candidate policy (authz.shadow_policy) beside the live one on every
// tools/call, and never decides anything: the live policy decides every call exactly as it would
// without a shadow. A call the two policies decide differently is a disagreement: it is logged at
// Info (principal, tool, both decisions and the lines that made them), counted in
// toolgate_policy_shadow_disagreements_total{tool,direction}, and written on the call's audit
// record as its shadow field (audit.Shadow), where `toolgate policy diff --shadow` finds it.
//
// The link runs right after resolve, before authorize: a call the live policy denies stops at
// authorize (or conditions), and those are exactly the calls a shadow that allows more disagrees
// on. It compares full decisions ([authz.Policy.Decide], argument conditions included) on the
// arguments as received. Both decisions are memoized by their policies (authz/memo.go): for a tool
// no conditional line can match, the link costs two map lookups, and the live answer it asks for
// is the one conditions asks for again.
//
// The shadow policy is an [authz.Store] of its own, on the live model: it reloads on its file's
// changes and on SIGHUP like the live policy, and keeps its last good version on an error. The
// gateway builds it (gateway/shadow.go); a nil [Guard] or a Guard without a policy lets every call
// through untouched.
package shadow

import (
	"context"
	"log/slog"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
)

// Guard compares the shadow policy's decisions with the live policy's.
type Guard struct {
	// Policy is the shadow policy in force (its Store's Current); nil: no shadow.
	Policy  func() *authz.Policy
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Link is the shadow link. It never stops a call.
func (g *Guard) Link() pipeline.Link { return pipeline.Step("shadow", g.check) }

func (g *Guard) check(_ context.Context, x *pipeline.Exchange) *envelope.Error {
	if g == nil || g.Policy == nil || x.Tool == nil {
		return nil
	}
	sp := g.Policy()
	if sp == nil {
		return nil
	}
	req := authz.Request{Subject: x.Call.Subject, Object: x.Tool.ID, Action: authz.ActCall, Args: x.Call.Args}
	shadow := sp.Decide(req)
	live := x.Policy.Decide(req)
	if live.Allowed == shadow.Allowed {
		return nil
	}
	x.Shadow = &audit.Shadow{Decision: decision(shadow), Rule: shadow.Rule, Version: sp.Version(),
		LiveDecision: decision(live), LiveRule: live.Rule}
	direction := metrics.ShadowDenies
	if shadow.Allowed {
		direction = metrics.ShadowAllows
	}
	g.Metrics.ShadowDisagreement(x.MetricTool(), direction)
	if g.Log != nil {
		g.Log.Info("shadow policy disagrees", "principal", x.Call.Subject.Principal, "tool", x.Tool.ID,
			"direction", direction, "live", string(decision(live)), "live_rule", live.Rule,
			"shadow", string(decision(shadow)), "shadow_rule", shadow.Rule, "shadow_version", sp.Version())
	}
	return nil
}

func decision(d authz.Decision) audit.Decision {
	if d.Allowed {
		return audit.DecisionAllowed
	}
	return audit.DecisionDenied
}
