package metrics

import "github.com/prometheus/client_golang/prometheus"

// Results of an approval webhook delivery (toolgate_approval_webhooks_total).
const (
	WebhookDelivered = "delivered" // the receiver answered 2xx, after any retries
	WebhookFailed    = "failed"    // given up: retries ran out, a 4xx, or the gateway stopped
	WebhookDropped   = "dropped"   // never sent: too many deliveries were pending
)

// webhookMetrics count the deliveries of approval webhooks (approvals.rules[].webhooks).
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
}

func (w *webhookMetrics) register(m *Metrics) {
	w.deliveries = m.counterVec("toolgate_approval_webhooks_total",
		"Approval webhook deliveries by webhook (its place in the config: approvals.rules[i].webhooks[j]) and result (delivered|failed|dropped).",
		"webhook", "result")
}

// ApprovalWebhook counts one delivery's end. webhook names its place in the config, so the config
// bounds the label; the URL never appears (it may be a credential).
func (m *Metrics) ApprovalWebhook(webhook, result string) {
	if m == nil {
		return
	}
	m.webhooks.deliveries.WithLabelValues(labels(webhook, result)...).Inc()
}
