package metrics

// BreakerState sets server's toolgate_breaker_state to the state breaker.Set.State names: 0 for
// "closed", 1 for "half-open", 2 for "open", so that max_over_time shows the worst state in a range.
// Any other state leaves the gauge as it was: a guess would be worse than a stale value.
func (m *Metrics) BreakerState(server, state string) {
	if m == nil {
		return
	}
	if v, ok := breakerValues[state]; ok {
		m.breakerState.WithLabelValues(labels(server)...).Set(v)
	}
}

// UpstreamUp sets toolgate_upstream_up for server: 1 while it has a live connection, 0 otherwise.
func (m *Metrics) UpstreamUp(server string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.upstreamUp.WithLabelValues(labels(server)...).Set(v)
}

// UpstreamRestart counts one live connection of server that was lost (a stdio child exited, an HTTP
// session ended) and is being brought back. Failed attempts to start are not restarts.
func (m *Metrics) UpstreamRestart(server string) {
	if m == nil {
		return
	}
	m.restarts.WithLabelValues(labels(server)...).Inc()
}

// CatalogSize sets the number of tools in the current catalog.
func (m *Metrics) CatalogSize(tools int) {
	if m == nil {
		return
	}
	m.catalogTools.Set(float64(tools))
}

// PolicyReload counts one policy reload attempt: ok when a valid policy is in force afterwards (new or
// unchanged), not ok when the reload was refused and the last good policy stayed.
func (m *Metrics) PolicyReload(ok bool) {
	if m == nil {
		return
	}
	result := "error"
	if ok {
		result = "ok"
	}
	m.policyReloads.WithLabelValues(result).Inc()
}

// ConfigReload counts one reload of the config file's keys (SIGHUP or a change to the file): applied
// when the file loaded and its keys are in force (changed or not), rejected when it did not and the
// last good keys stayed.
func (m *Metrics) ConfigReload(applied bool) {
	if m == nil {
		return
	}
	result := "rejected"
	if applied {
		result = "applied"
	}
	m.configReloads.WithLabelValues(result).Inc()
}

// PolicyInfo makes version the only series of toolgate_policy_info, with value 1. Join on it to tell
// which policy was in force; the old version's series disappears.
func (m *Metrics) PolicyInfo(version string) {
	if m == nil {
		return
	}
	m.policyMu.Lock()
	defer m.policyMu.Unlock()
	m.policyInfo.Reset()
	m.policyInfo.WithLabelValues(labels(version)...).Set(1)
}

// PolicyDenyLines sets toolgate_policy_deny_lines, the deny lines of the policy in force.
func (m *Metrics) PolicyDenyLines(n int) {
	if m == nil {
		return
	}
	m.policyDenies.Set(float64(n))
}

// PolicyDenyRemoval counts one reload whose new policy removes deny lines: applied, or refused and the
// last good policy kept (authz.refuse_deny_removal).
func (m *Metrics) PolicyDenyRemoval(applied bool) {
	if m == nil {
		return
	}
	result := "refused"
	if applied {
		result = "applied"
	}
	m.denyRemovals.WithLabelValues(result).Inc()
}

// ApprovalsPending sets the number of approval requests waiting for an approver.
func (m *Metrics) ApprovalsPending(n int) {
	if m == nil {
		return
	}
	m.approvals.Set(float64(n))
}

// AuditWriteError counts one audit trail failure (audit.Options.OnError): a record that could
// not be written (or synced), or another problem with the trail (a failed rotation or
// interval flush, the file moved or removed).
func (m *Metrics) AuditWriteError() {
	if m == nil {
		return
	}
	m.auditErrors.Inc()
}

// StateUp sets toolgate_state_up: 1 while the shared state store answers, 0 while it does not. The series
// appears with the first call, so a gateway without a shared store has none.
func (m *Metrics) StateUp(up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.stateUp.WithLabelValues().Set(v)
}

// StateFeatures creates toolgate_state_errors_total at 0 for each feature that uses the shared store, so
// rate() and alerts see 0 rather than no data.
func (m *Metrics) StateFeatures(features ...string) {
	if m == nil {
		return
	}
	for _, f := range features {
		m.stateErrors.WithLabelValues(labels(f)...)
	}
}

// StateError counts one operation of feature (rate_limits, policy) on the shared store that failed or was
// not tried because the store was down. For rate limits, that is one call whose limits could not be
// checked.
func (m *Metrics) StateError(feature string) {
	if m == nil {
		return
	}
	m.stateErrors.WithLabelValues(labels(feature)...).Inc()
}
