package gateway

import (
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
)

const breakersYAML = `
limits:
  breaker: {failures: 2, open_for: 1m}
  retry: {max_attempts: 4, max_delay: 5s}
  retry_budget: {ratio: 0, min_per_second: 3}
mcpServers:
  orders:
    command: orders
    breaker: {half_open_probes: 3}
    retry: {base_delay: 10ms}
  search:
    url: http://127.0.0.1:9000/mcp
    disabled: true
`

func TestBreakerSettingsFrom(t *testing.T) {
	cfg, err := config.Parse("toolgate.yaml", []byte(breakersYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := breakerSettingsFrom(cfg)
	want := map[string]breaker.Settings{
		"orders": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 3},
		"search": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 1},
	}
	if len(got) != len(want) || got["orders"] != want["orders"] || got["search"] != want["search"] {
		t.Fatalf("breakerSettingsFrom = %+v, want %+v", got, want)
	}
	retries := []struct {
		server string
		want   breaker.RetrySettings
	}{
		{"orders", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"search", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"unknown", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
	}
	for _, r := range retries {
		if got := retryFrom(cfg, r.server); got != r.want {
			t.Errorf("retryFrom(%s) = %+v, want %+v", r.server, got, r.want)
		}
	}
	budgets := budgetsFrom(cfg, func() time.Time { return time.Unix(0, 0) })
	if len(budgets) != 2 || budgets["orders"] == budgets["search"] {
		t.Fatalf("want one budget per server, got %v", budgets)
	}
	n := 0
	for budgets["orders"].TryRetry() {
		n++
	}
	if n != 3 { // ratio 0, min_per_second 3: one second of the floor at start
		t.Fatalf("orders budget allowed %d retries at start, want 3", n)
	}
}

func TestBreakersFromNilConfig(t *testing.T) {
	if len(breakerSettingsFrom(nil)) != 0 || len(budgetsFrom(nil, nil)) != 0 {
		t.Fatal("a nil config has no servers")
	}
	if got, want := retryFrom(nil, "x"), (breaker.RetrySettings{}).WithDefaults(); got != want {
		t.Fatalf("retryFrom(nil) = %+v, want %+v", got, want)
	}
}

// TestBreakerSetFromConfig: the settings breakerSettingsFrom reads drive the breakers NewSet builds.
func TestBreakerSetFromConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := config.Parse("toolgate.yaml", []byte(breakersYAML), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s := breaker.NewSet(breakerSettingsFrom(cfg), slog.New(slog.DiscardHandler))
		for range 2 {
			done, err := s.Allow("orders")
			if err != nil {
				t.Fatal(err)
			}
			done(breaker.NeverSent)
		}
		_, err = s.Allow("orders")
		if oe, ok := err.(*breaker.OpenError); !ok || oe.RetryIn != time.Minute {
			t.Fatalf("after 2 failures: %v, want an OpenError with RetryIn 1m", err)
		}
		if s.State("search") != "closed" {
			t.Fatal("search affected")
		}
	})
}

// breaker's defaults (what a zero setting stands for) are config's: a
// setting left out of the config means the same whichever applies it.
func TestBreakerDefaultsMatchConfig(t *testing.T) {
	if got, want := (breaker.Settings{}).WithDefaults(), (breaker.Settings{Failures: config.DefaultBreakerFailures,
		OpenFor: config.DefaultBreakerOpenFor, HalfOpenProbes: config.DefaultBreakerHalfOpenProbes}); got != want {
		t.Errorf("breaker defaults %+v, config's %+v", got, want)
	}
	if got, want := (breaker.RetrySettings{}).WithDefaults(), (breaker.RetrySettings{MaxAttempts: config.DefaultRetryMaxAttempts,
		BaseDelay: config.DefaultRetryBaseDelay, MaxDelay: config.DefaultRetryMaxDelay}); got != want {
		t.Errorf("retry defaults %+v, config's %+v", got, want)
	}
	if got, want := breakerSettingsFrom(&config.Config{Servers: map[string]*config.Server{"s": {}}})["s"], (breaker.Settings{}).WithDefaults(); got != want {
		t.Errorf("a server without settings: %+v, want the breaker defaults %+v", got, want)
	}
}

// Config rate limits arrive in the guard's terms: rate per second and the
// burst (defaulting to the rate per period); roles and tools by name.
func TestLimitsFromConfig(t *testing.T) {
	l := limitsFrom(config.RateLimits{
		Principal: &config.RateLimit{Rate: 60, Per: config.Duration(time.Minute)},
		Roles:     map[string]*config.RateLimit{"viewer": {Rate: 2}},
		Tools:     map[string]*config.RateLimit{"orders/*": {Rate: 10, Burst: 20}},
	})
	got := fmt.Sprintf("%+v %+v %+v", *l.Principal, l.Roles, l.Tools)
	if want := "{PerSecond:1 Burst:60} map[viewer:{PerSecond:2 Burst:2}] map[orders/*:{PerSecond:10 Burst:20}]"; got != want {
		t.Errorf("limits %s, want %s", got, want)
	}
	if !limitsFrom(config.RateLimits{}).Empty() {
		t.Error("no rate_limits: the guard should be left out")
	}
}
