package metrics

import "github.com/prometheus/client_golang/prometheus"

// Directions of a shadow policy disagreement (toolgate_policy_shadow_disagreements_total): the
// shadow policy would allow a call the live one denies, or deny one it allows.
const (
	ShadowAllows = "shadow_allows"
	ShadowDenies = "shadow_denies"
)

// shadowMetrics count the calls the shadow policy (authz.shadow_policy) decides otherwise than the
// live one.
type shadowMetrics struct {
	disagreements *prometheus.CounterVec
	cache         children[[2]string, prometheus.Counter]
}

func (s *shadowMetrics) register(m *Metrics) {
	s.disagreements = m.counterVec("toolgate_policy_shadow_disagreements_total",
		"tools/call decisions where the shadow policy (authz.shadow_policy) disagrees with the live one, by canonical tool and direction (shadow_allows|shadow_denies). The live policy decided every one of them.",
		"tool", "direction")
}

// ShadowDisagreement counts one call the shadow policy decided otherwise than the live policy. tool
// is the canonical "<server>/<tool>" (as CallFinished's: only catalog IDs, so the catalog bounds
// the label), direction ShadowAllows or ShadowDenies.
func (m *Metrics) ShadowDisagreement(tool, direction string) {
	if m == nil {
		return
	}
	c := m.shadow.cache.get([2]string{tool, direction}, func() prometheus.Counter {
		return m.shadow.disagreements.WithLabelValues(labels(tool, direction)...)
	})
	c.Inc()
}
