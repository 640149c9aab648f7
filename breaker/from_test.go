package breaker

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/config"
)

const fromYAML = `
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

func TestSettingsFrom(t *testing.T) {
	cfg, err := config.Parse("toolgate.yaml", []byte(fromYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := SettingsFrom(cfg)
	want := map[string]Settings{
		"orders": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 3},
		"search": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 1},
	}
	if len(got) != len(want) || got["orders"] != want["orders"] || got["search"] != want["search"] {
		t.Fatalf("SettingsFrom = %+v, want %+v", got, want)
	}
	retries := []struct {
		server string
		want   RetrySettings
	}{
		{"orders", RetrySettings{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"search", RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"unknown", RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
	}
	for _, r := range retries {
		if got := RetryFrom(cfg, r.server); got != r.want {
			t.Errorf("RetryFrom(%s) = %+v, want %+v", r.server, got, r.want)
		}
	}
	budgets := BudgetsFrom(cfg, func() time.Time { return time.Unix(0, 0) })
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

func TestFromNilConfig(t *testing.T) {
	if len(SettingsFrom(nil)) != 0 || len(BudgetsFrom(nil, nil)) != 0 {
		t.Fatal("a nil config has no servers")
	}
	if got, want := RetryFrom(nil, "x"), (RetrySettings{}).WithDefaults(); got != want {
		t.Fatalf("RetryFrom(nil) = %+v, want %+v", got, want)
	}
}

// TestSetFromConfig: the settings SettingsFrom reads drive the breakers NewSet builds.
func TestSetFromConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := config.Parse("toolgate.yaml", []byte(fromYAML), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s := NewSet(SettingsFrom(cfg), slog.New(slog.DiscardHandler))
		for range 2 {
			done, err := s.Allow("orders")
			if err != nil {
				t.Fatal(err)
			}
			done(NeverSent)
		}
		_, err = s.Allow("orders")
		if oe, ok := err.(*OpenError); !ok || oe.RetryIn != time.Minute {
			t.Fatalf("after 2 failures: %v, want an OpenError with RetryIn 1m", err)
		}
		if s.State("search") != "closed" {
			t.Fatal("search affected")
		}
	})
}
