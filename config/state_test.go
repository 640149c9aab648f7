package config

import (
	"strings"
	"testing"
	"time"
)

// stateProblems are the TestProblems cases of state.
var stateProblems = []problemCase{
	{"state redis without url", "state:\n  redis: {key_prefix: gw}\n", nil, 2, "state.redis", `url is required: the Redis server, such as "redis://127.0.0.1:6379/0"`},
	{"state redis url an http url", "state:\n  redis: {url: \"http://user:hunter2@cache:6379\"}\n", nil, 2, "state.redis.url",
		`expected a redis:// or rediss:// URL, got "http://user:xxxxx@cache:6379"`},
	{"state redis url without host", "state:\n  redis: {url: \"redis:///0\"}\n", nil, 2, "state.redis.url", "expected a URL with a host"},
	{"state redis url does not parse", "state:\n  redis: {url: \"redis://:hunter2@[::1\"}\n", nil, 2, "state.redis.url", "it does not parse"},
	{"state redis url bad port", "state:\n  redis: {url: \"redis://cache:0\"}\n", nil, 2, "state.redis.url", `expected a port number from 1 to 65535, got "0"`},
	{"state redis url bad database", "state:\n  redis: {url: \"redis://cache/zero\"}\n", nil, 2, "state.redis.url", `expected a database number as the path ("/0"), got "/zero"`},
	{"state redis url with options", "state:\n  redis: {url: \"redis://cache/0?dial_timeout=5s\"}\n", nil, 2, "state.redis.url",
		"expected no query or fragment; the timeouts are state.redis.dial_timeout and op_timeout"},
	{"state redis url a number", "state:\n  redis: {url: 6379}\n", nil, 2, "state.redis.url", "expected a string, got the number 6379"},
	{"state redis unset variable", "state:\n  redis: {url: \"${REDIS_URL}\"}\n", nil, 2, "state.redis.url", "environment variable REDIS_URL is not set"},
	{"state key prefix with a space", "state:\n  redis: {url: \"redis://cache\", key_prefix: \"tool gate\"}\n", nil, 2, "state.redis.key_prefix",
		`expected at most 64 characters without spaces or control characters, got "tool gate"`},
	{"state dial timeout too long", "state:\n  redis: {url: \"redis://cache\", dial_timeout: 2m}\n", nil, 2, "state.redis.dial_timeout", "expected a duration from 10ms to 1m, got 2m"},
	{"state op timeout too long", "state:\n  redis:\n    url: \"redis://cache\"\n    op_timeout: 30s\n", nil, 4, "state.redis.op_timeout", "expected a duration from 1ms to 10s, got 30s"},
	{"state failure mode unknown", "state:\n  redis: {url: \"redis://cache\"}\n  rate_limits_on_failure: ignore\n", nil, 3, "state.rate_limits_on_failure",
		`expected one of open, closed, got "ignore"`},
	{"state failure mode without redis", "state:\n  rate_limits_on_failure: closed\n", nil, 2, "state.rate_limits_on_failure", "applies only with state.redis"},
	{"unknown state key", "state: {backend: redis}\n", nil, 1, "state.backend", "unknown key; allowed keys here: approvals_on_failure, dedup_on_failure, rate_limits_on_failure, redis"},
	{"dedup failure mode unknown", "state:\n  redis: {url: \"redis://cache\"}\n  dedup_on_failure: ignore\n", nil, 3, "state.dedup_on_failure",
		`expected one of open, closed, got "ignore"`},
	{"approvals cannot fail open", "state:\n  redis: {url: \"redis://cache\"}\n  approvals_on_failure: open\n", nil, 3, "state.approvals_on_failure",
		`expected closed, got "open": a call that needs a human approval never runs while the approvals store cannot be reached (open would let it run unapproved)`},
	{"approvals failure mode unknown", "state:\n  redis: {url: \"redis://cache\"}\n  approvals_on_failure: wait\n", nil, 3, "state.approvals_on_failure",
		`expected one of closed, got "wait"`},
	{"dedup failure mode without redis", "state:\n  dedup_on_failure: open\n", nil, 2, "state.dedup_on_failure",
		"applies only with state.redis (without it, duplicate suppression is kept in memory and cannot fail)"},
	{"unknown redis key", "state:\n  redis: {url: \"redis://cache\", password: x}\n", nil, 2, "state.redis.password", "allowed keys here: dial_timeout, key_prefix, op_timeout, url"},
}

// A password in the URL never reaches a message, however the URL is wrong.
func TestRedisURLNotEchoed(t *testing.T) {
	for _, raw := range []string{"http://u:hunter2@x", "redis://:hunter2@/0", "redis://:hunter2@[::1", "redis://:hunter2@x/a", "redis://:hunter2@x:99999", "redis://:hunter2@x/0?a=hunter2"} {
		probs := parseProblems(t, "state:\n  redis: {url: \"${U}\"}\n", map[string]string{"U": raw})
		for _, p := range probs {
			if strings.Contains(p.String(), "hunter2") {
				t.Errorf("%s: problem %q echoes the password", raw, p)
			}
		}
	}
}

func TestStateSettings(t *testing.T) {
	tests := []struct {
		name       string
		src        string
		shared     bool
		url        string
		prefix     string
		dial, op   time.Duration
		failClosed bool
		dedupOpen  bool
	}{
		{"embedded", "", false, "", "toolgate:", time.Second, 200 * time.Millisecond, false, false},
		{"redis with defaults", "state:\n  redis: {url: \"redis://cache:6379/0\"}\n", true, "redis://cache:6379/0", "toolgate:", time.Second, 200 * time.Millisecond, false, false},
		{"everything written", "state:\n  redis: {url: \"rediss://u:p@cache/2\", key_prefix: \"prod:\", dial_timeout: 3s, op_timeout: 50ms}\n  rate_limits_on_failure: closed\n  dedup_on_failure: open\n  approvals_on_failure: closed\n",
			true, "rediss://u:p@cache/2", "prod:", 3 * time.Second, 50 * time.Millisecond, true, true},
		{"open written", "state:\n  redis: {url: \"redis://cache\"}\n  rate_limits_on_failure: open\n", true, "redis://cache", "toolgate:", time.Second, 200 * time.Millisecond, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("toolgate.yaml", []byte(tt.src), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			got := []any{c.StateShared(), c.StateRedisURL(), c.StateKeyPrefix(), c.StateDialTimeout(), c.StateOpTimeout(), c.RateLimitsFailClosed(), c.DedupFailOpen()}
			want := []any{tt.shared, tt.url, tt.prefix, tt.dial, tt.op, tt.failClosed, tt.dedupOpen}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("setting %d: got %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}
