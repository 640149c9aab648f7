package config

import (
	"testing"
	"time"
)

// resilienceProblems are the TestProblems cases of max_in_flight, breaker, retry, retry_budget, trusted
// and retry_safe.
var resilienceProblems = func() []problemCase {
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	return []problemCase{
		{"max_in_flight too large", "limits: {max_in_flight: 20000}\n", nil, 1, "limits.max_in_flight", "expected a whole number from 1 to 10000, got 20000"},
		{"negative max_in_flight", stdio + "    max_in_flight: -1\n", nil, 4, "mcpServers.orders.max_in_flight", "from 1 to 10000, got -1"},
		{"max_in_flight not a number", stdio + "    max_in_flight: \"64\"\n", nil, 4, "mcpServers.orders.max_in_flight", `expected a whole number such as 5, got the string "64"`},
		{"max_in_flight a fraction", "limits: {max_in_flight: 1.5}\n", nil, 1, "limits.max_in_flight", "expected a whole number such as 5, got the number 1.5"},
		{"max_in_flight beyond int64", "limits: {max_in_flight: 99999999999999999999}\n", nil, 1, "limits.max_in_flight",
			"expected a whole number, got 99999999999999999999, which is too large"},
		{"breaker not a mapping", stdio + "    breaker: 5\n", nil, 4, "mcpServers.orders.breaker",
			"expected a mapping with keys failures, half_open_probes, open_for, got the number 5"},
		{"unknown breaker key", "limits:\n  breaker: {failure: 3}\n", nil, 2, "limits.breaker.failure",
			`unknown key; allowed keys here: failures, half_open_probes, open_for (did you mean "failures"?)`},
		{"failures out of range", stdio + "    breaker: {failures: 1001}\n", nil, 4, "mcpServers.orders.breaker.failures", "expected a whole number from 1 to 1000, got 1001"},
		{"open_for too short", "limits: {breaker: {open_for: 500ms}}\n", nil, 1, "limits.breaker.open_for", "expected a duration from 1s to 1h, got 500ms"},
		{"open_for as a number", "limits: {breaker: {open_for: 30}}\n", nil, 1, "limits.breaker.open_for", `got the number 30 (write "30s" or another unit)`},
		{"half_open_probes out of range", stdio + "    breaker:\n      half_open_probes: 101\n", nil, 5, "mcpServers.orders.breaker.half_open_probes",
			"expected a whole number from 1 to 100, got 101"},
		{"breaker on a tool", stdio + "    tools: {t: {breaker: {failures: 1}}}\n", nil, 4, "mcpServers.orders.tools.t.breaker",
			"unknown key; allowed keys here: max_result_bytes, override, retry_safe, timeout"},
		{"unknown retry key", stdio + "    retry: {attempts: 3}\n", nil, 4, "mcpServers.orders.retry.attempts",
			"unknown key; allowed keys here: base_delay, max_attempts, max_delay"},
		{"max_attempts out of range", "limits: {retry: {max_attempts: 11}}\n", nil, 1, "limits.retry.max_attempts", "expected a whole number from 1 to 10, got 11"},
		{"base_delay too short", stdio + "    retry: {base_delay: 500us}\n", nil, 4, "mcpServers.orders.retry.base_delay", "expected a duration from 1ms to 10s, got 500µs"},
		{"max_delay too long", "limits: {retry: {max_delay: 2m}}\n", nil, 1, "limits.retry.max_delay", "expected a duration from 1ms to 1m, got 2m"},
		{"max_delay below base_delay", "limits:\n  retry: {base_delay: 1s, max_delay: 500ms}\n", nil, 2, "limits.retry.max_delay",
			"expected at least base_delay (1s), got 500ms"},
		{"base_delay above the default max_delay", "limits:\n  retry:\n    base_delay: 5s\n", nil, 3, "limits.retry.base_delay",
			"expected at most max_delay (2s, the default), got 5s; set max_delay as well"},
		{"server max_delay below inherited base_delay", "limits: {retry: {base_delay: 1s, max_delay: 5s}}\n" + stdio + "    retry: {max_delay: 500ms}\n", nil, 5,
			"mcpServers.orders.retry.max_delay", "expected at least base_delay (1s, from limits.retry.base_delay), got 500ms"},
		{"server base_delay above inherited max_delay", "limits: {retry: {max_delay: 1s}}\n" + stdio + "    retry: {base_delay: 3s}\n", nil, 5,
			"mcpServers.orders.retry.base_delay", "expected at most max_delay (1s, from limits.retry.max_delay), got 3s; set max_delay as well"},
		{"out-of-range base_delay is reported once", "limits: {retry: {base_delay: 20s}}\n", nil, 1, "limits.retry.base_delay", "expected a duration from 1ms to 10s, got 20s"},
		{"retry_budget ratio above 1", "limits:\n  retry_budget: {ratio: 1.5}\n", nil, 2, "limits.retry_budget.ratio", "expected a number from 0 to 1, got 1.5"},
		{"negative retry_budget ratio", "limits: {retry_budget: {ratio: -0.1}}\n", nil, 1, "limits.retry_budget.ratio", "expected a number from 0 to 1, got -0.1"},
		{"min_per_second out of range", "limits: {retry_budget: {min_per_second: 2000}}\n", nil, 1, "limits.retry_budget.min_per_second",
			"expected a number from 0 to 1000, got 2000"},
		{"ratio as a percentage", "limits: {retry_budget: {ratio: 20%}}\n", nil, 1, "limits.retry_budget.ratio", `expected a number such as 0.5, got the string "20%"`},
		{"dedup window over a day", "limits: {dedup: {window: 48h}}\n", nil, 1, "limits.dedup.window", "expected a duration from 0s to 24h, got 48h"},
		{"dedup key_window too short", "limits: {dedup: {key_window: 10s}}\n", nil, 1, "limits.dedup.key_window", "expected a duration from 1m to 720h, got 10s"},
		{"dedup max_entries negative", "limits: {dedup: {max_entries: -1}}\n", nil, 1, "limits.dedup.max_entries", "expected a whole number from 1 to 1000000, got -1"},
		{"dedup max_bytes too small", "limits: {dedup: {max_bytes: 1000}}\n", nil, 1, "limits.dedup.max_bytes", "(1 MiB)"},
		{"dedup max_bytes a string", "limits: {dedup: {max_bytes: 64MiB}}\n", nil, 1, "limits.dedup.max_bytes", `expected an integer number of bytes such as 1048576, got the string "64MiB"`},
		{"dedup unknown key", "limits: {dedup: {windw: 1m}}\n", nil, 1, "limits.dedup.windw", "unknown key"},
		{"ratio infinite", "limits: {retry_budget: {ratio: .inf}}\n", nil, 1, "limits.retry_budget.ratio", "expected a number such as 0.5, got the number .inf"},
		{"retry_budget on a server", stdio + "    retry_budget: {ratio: 0.1}\n", nil, 4, "mcpServers.orders.retry_budget", `unknown key; allowed keys here: args, auth, breaker`},
		{"trusted not a boolean", stdio + "    trusted: \"yes\"\n", nil, 4, "mcpServers.orders.trusted", `expected true or false, got the string "yes"`},
		{"tool retry_safe not a boolean", stdio + "    tools:\n      get_order: {retry_safe: 1}\n", nil, 5, "mcpServers.orders.tools.get_order.retry_safe",
			"expected true or false, got the number 1"},
	}
}()

// TestResilienceSettings loads each resilience key and reads it back through its accessor, with the
// precedence server > limits > default, key by key.
func TestResilienceSettings(t *testing.T) {
	const src = `
limits:
  max_in_flight: 32
  breaker: {failures: 3, open_for: 1m}
  retry: {max_attempts: 4, base_delay: 50ms, max_delay: 5s}
  retry_budget: {ratio: 0, min_per_second: 2.5}
mcpServers:
  orders:
    command: orders
    max_in_flight: 8
    breaker: {open_for: 10s, half_open_probes: 2}
    retry: {max_delay: 1s}
    trusted: true
  search:
    url: http://127.0.0.1:9000/mcp
    egress: {allow: [loopback]}
`
	c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"server max_in_flight", c.MaxInFlight("orders"), 8},
		{"limits max_in_flight", c.MaxInFlight("search"), 32},
		{"unknown server max_in_flight", c.MaxInFlight("nope"), 32},
		{"failures from limits", c.BreakerFailures("orders"), uint32(3)},
		{"server open_for", c.BreakerOpenFor("orders"), 10 * time.Second},
		{"limits open_for", c.BreakerOpenFor("search"), time.Minute},
		{"server half_open_probes", c.BreakerHalfOpenProbes("orders"), uint32(2)},
		{"default half_open_probes", c.BreakerHalfOpenProbes("search"), uint32(1)},
		{"max_attempts from limits", c.RetryMaxAttempts("orders"), 4},
		{"base_delay from limits", c.RetryBaseDelay("orders"), 50 * time.Millisecond},
		{"server max_delay", c.RetryMaxDelay("orders"), time.Second},
		{"limits max_delay", c.RetryMaxDelay("search"), 5 * time.Second},
		{"explicit zero ratio", c.RetryBudgetRatio(), 0.0},
		{"min_per_second", c.RetryBudgetMinPerSecond(), 2.5},
		{"trusted", c.Trusted("orders"), true},
		{"not trusted", c.Trusted("search"), false},
		{"unknown server not trusted", c.Trusted("nope"), false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v (%T), want %v (%T)", tt.name, tt.got, tt.got, tt.want, tt.want)
		}
	}
}

func TestResilienceDefaults(t *testing.T) {
	for _, c := range []*Config{{}, {Servers: map[string]*Server{"s": {}}}} {
		tests := []struct {
			name      string
			got, want any
		}{
			{"MaxInFlight", c.MaxInFlight("s"), 64},
			{"BreakerFailures", c.BreakerFailures("s"), uint32(5)},
			{"BreakerOpenFor", c.BreakerOpenFor("s"), 30 * time.Second},
			{"BreakerHalfOpenProbes", c.BreakerHalfOpenProbes("s"), uint32(1)},
			{"RetryMaxAttempts", c.RetryMaxAttempts("s"), 3},
			{"RetryBaseDelay", c.RetryBaseDelay("s"), 100 * time.Millisecond},
			{"RetryMaxDelay", c.RetryMaxDelay("s"), 2 * time.Second},
			{"RetryBudgetRatio", c.RetryBudgetRatio(), 0.2},
			{"RetryBudgetMinPerSecond", c.RetryBudgetMinPerSecond(), 1.0},
			{"Trusted", c.Trusted("s"), false},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%d servers: %s = %v, want %v", len(c.Servers), tt.name, tt.got, tt.want)
			}
		}
	}
}

// TestToolRetrySafe: a tool's retry_safe wins over its server's, an explicit false included; explicit is
// false only when neither says anything.
func TestToolRetrySafe(t *testing.T) {
	const src = `
mcpServers:
  safe:
    command: s
    retry_safe: true
    tools:
      refund: {retry_safe: false}
      get: {timeout: 1s}
  unsafe:
    command: u
    retry_safe: false
    tools:
      get: {retry_safe: true}
  silent:
    command: x
    trusted: true
    tools:
      get: {retry_safe: true}
      put: {timeout: 2s}
`
	c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		server, tool   string
		safe, explicit bool
	}{
		{"safe", "refund", false, true},
		{"safe", "get", true, true},
		{"safe", "unlisted", true, true},
		{"unsafe", "get", true, true},
		{"unsafe", "other", false, true},
		{"silent", "get", true, true},
		{"silent", "put", false, false},
		{"silent", "unlisted", false, false},
		{"nope", "get", false, false},
	}
	for _, tt := range tests {
		safe, explicit := c.ToolRetrySafe(tt.server, tt.tool)
		if safe != tt.safe || explicit != tt.explicit {
			t.Errorf("ToolRetrySafe(%s, %s) = %v, %v; want %v, %v", tt.server, tt.tool, safe, explicit, tt.safe, tt.explicit)
		}
	}
	var zero Config
	if safe, explicit := zero.ToolRetrySafe("a", "b"); safe || explicit {
		t.Errorf("zero Config: ToolRetrySafe = %v, %v", safe, explicit)
	}
}

// TestRetryDelaysInRange: limits and server values that agree load; the order check sees inherited values.
func TestRetryDelaysInRange(t *testing.T) {
	for _, src := range []string{
		"limits: {retry: {base_delay: 2s}}\n",                                                         // equal to the default max
		"limits: {retry: {base_delay: 5s, max_delay: 5s}}\n",                                          // equal
		"limits: {retry: {max_delay: 10s}}\nmcpServers: {s: {command: x, retry: {base_delay: 5s}}}\n", // inherited max
		"limits: {retry: {base_delay: 5s, max_delay: 10s}}\nmcpServers: {s: {command: x, retry: {max_attempts: 1}}}\n",
		"limits: {retry_budget: {ratio: 1, min_per_second: 0}}\n",
		"limits: {max_in_flight: 0, breaker: {failures: 0}}\n", // 0 means the default
	} {
		if _, err := Parse("toolgate.yaml", []byte(src), envOf(nil)); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestDedupAccessors(t *testing.T) {
	var zero Config
	if zero.DedupWindow() != DefaultDedupWindow || zero.DedupKeyWindow() != DefaultDedupKeyWindow ||
		zero.DedupMaxEntries() != DefaultDedupMaxEntries || zero.DedupMaxBytes() != DefaultDedupMaxBytes || zero.DedupIncludeRetrySafe() {
		t.Fatal("zero config does not give the dedup defaults")
	}
	cfg, err := Parse("toolgate.yaml", []byte("limits: {dedup: {window: 0s, key_window: 2h, max_entries: 5, max_bytes: 2097152, include_retry_safe: true}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DedupWindow() != 0 || cfg.DedupKeyWindow() != 2*time.Hour || cfg.DedupMaxEntries() != 5 || cfg.DedupMaxBytes() != 2<<20 || !cfg.DedupIncludeRetrySafe() {
		t.Fatalf("dedup settings: %v %v %v %v", cfg.DedupWindow(), cfg.DedupKeyWindow(), cfg.DedupMaxEntries(), cfg.DedupIncludeRetrySafe())
	}
}
