package main

import (
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
)

// Package breaker takes its own settings, not the config: these convert
// the config (limits.breaker, limits.retry, limits.retry_budget, and each
// server's overrides) into them, with the defaults applied.

// breakerSettingsFrom is the breaker settings of every configured server
// (disabled ones included), ready for breaker.NewSet. A nil cfg means the
// zero Config: no servers.
func breakerSettingsFrom(cfg *config.Config) map[string]breaker.Settings {
	if cfg == nil {
		return map[string]breaker.Settings{}
	}
	out := make(map[string]breaker.Settings, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = breaker.Settings{
			Failures:       cfg.BreakerFailures(name),
			OpenFor:        cfg.BreakerOpenFor(name),
			HalfOpenProbes: cfg.BreakerHalfOpenProbes(name),
		}
	}
	return out
}

// retryFrom is the retry settings of server. An unknown server gets the
// gateway-wide settings; a nil cfg, the defaults.
func retryFrom(cfg *config.Config, server string) breaker.RetrySettings {
	if cfg == nil {
		cfg = &config.Config{}
	}
	return breaker.RetrySettings{
		MaxAttempts: cfg.RetryMaxAttempts(server),
		BaseDelay:   cfg.RetryBaseDelay(server),
		MaxDelay:    cfg.RetryMaxDelay(server),
	}
}

// budgetsFrom is one retry budget per configured server
// (limits.retry_budget applies to each server on its own), on the clock
// now (nil means time.Now). A nil cfg means no servers.
func budgetsFrom(cfg *config.Config, now func() time.Time) map[string]*breaker.Budget {
	if cfg == nil {
		return map[string]*breaker.Budget{}
	}
	out := make(map[string]*breaker.Budget, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = breaker.NewBudget(cfg.RetryBudgetRatio(), cfg.RetryBudgetMinPerSecond(), now)
	}
	return out
}
