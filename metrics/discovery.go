package metrics

import "github.com/prometheus/client_golang/prometheus"

// Results of a discovery search (toolgate_tool_searches_total).
const (
	SearchFound   = "found"   // at least one tool found
	SearchEmpty   = "empty"   // none: the words matched no tool the caller may call
	SearchInvalid = "invalid" // arguments the search could not read (invalid_arguments)
)

// discoveryMetrics count the searches of discovery clients (package discovery). A share of empty
// searches that grows says the catalog's words and the models' differ.
type discoveryMetrics struct {
	searches *prometheus.CounterVec
}

func (d *discoveryMetrics) register(m *Metrics) {
	d.searches = m.counterVec("toolgate_tool_searches_total",
		"Searches of the discovery meta-tool by toolset (a name under toolsets) and result (found|empty|invalid).",
		"toolset", "result")
}

// ToolSearch counts one search. toolset is a name the config gives, so the config bounds the label;
// the query itself never appears (it is the model's text).
func (m *Metrics) ToolSearch(toolset, result string) {
	if m == nil {
		return
	}
	m.discovery.searches.WithLabelValues(labels(toolset, result)...).Inc()
}
