package breaker

import (
	"time"

	"github.com/toolgate/toolgate/config"
)

// SettingsFrom is the breaker settings of every configured server (disabled ones included), with the
// defaults applied, ready for NewSet. A nil cfg means the zero Config: no servers.
func SettingsFrom(cfg *config.Config) map[string]Settings {
	if cfg == nil {
		return map[string]Settings{}
	}
	out := make(map[string]Settings, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = Settings{
			Failures:       cfg.BreakerFailures(name),
			OpenFor:        cfg.BreakerOpenFor(name),
			HalfOpenProbes: cfg.BreakerHalfOpenProbes(name),
		}
	}
	return out
}

// RetryFrom is the retry settings of server, with the defaults applied. An unknown server gets the
// gateway-wide settings; a nil cfg, the defaults.
func RetryFrom(cfg *config.Config, server string) RetrySettings {
	if cfg == nil {
		cfg = &config.Config{}
	}
	return RetrySettings{
		MaxAttempts: cfg.RetryMaxAttempts(server),
		BaseDelay:   cfg.RetryBaseDelay(server),
		MaxDelay:    cfg.RetryMaxDelay(server),
	}
}

// BudgetsFrom is one retry budget per configured server (limits.retry_budget applies to each server on its
// own), on the clock now (nil means time.Now). A nil cfg means no servers.
func BudgetsFrom(cfg *config.Config, now func() time.Time) map[string]*Budget {
	if cfg == nil {
		return map[string]*Budget{}
	}
	out := make(map[string]*Budget, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = NewBudget(cfg.RetryBudgetRatio(), cfg.RetryBudgetMinPerSecond(), now)
	}
	return out
}
