package main

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
)

// breakerOpenFor is the test upstream's breaker open_for: the shortest
// config allows. Everything a test checks while a breaker is open takes
// a few milliseconds of it.
const breakerOpenFor = 3 * time.Second

// replicaBreakerOpenFor is open_for in the three-replica breaker test, which
// checks two replicas in turn while the opening lasts: each check is a call
// and a metrics scrape on another process, and on a loaded 2-core machine
// (load average 20, seen in CI) the second came 4 s after the opening, when
// 3 s had already ended it. 10 s leaves room; the test waits out two
// openings, so this costs it about 14 s.
const replicaBreakerOpenFor = 10 * time.Second

// startBreakerReplicas is startReplicas with a breaker that opens after
// two failures, for replicaBreakerOpenFor, on the hostile upstream, and a short
// deadline on its sleep tool: a long sleep is a timed-out attempt, which
// counts against the breaker. The tools the test calls are declared
// retry-safe, which leaves duplicate suppression (and its store) out of it:
// with Redis down it would refuse other calls. A retry-safe attempt that
// timed out is not repeated, as the deadline is spent.
func startBreakerReplicas(t *testing.T, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{redis: redistest.Start(t),
		servers: stdioUpstream(t, "hostile", fmt.Sprintf("    breaker: {failures: 2, open_for: %s}\n    tools: {sleep: {timeout: 100ms, retry_safe: true}, echo: {retry_safe: true}}\n", replicaBreakerOpenFor))}
	for range n {
		cfg := writeConfig(t, rs.servers)
		write(t, cfg, mustRead(t, cfg)+replicaYAML(rs.redis))
		url, logs, gw := httpGatewayFull(t, cfg)
		t.Cleanup(func() { // each replica's log tells which breaker changed when
			if t.Failed() {
				t.Log(logs.String())
			}
		})
		admin := httptest.NewServer(gw.AdminHandler())
		t.Cleanup(admin.Close)
		rs.gws, rs.dirs, rs.urls, rs.admins = append(rs.gws, gw), append(rs.dirs, filepath.Dir(cfg)), append(rs.urls, url), append(rs.admins, admin)
		rs.clients = append(rs.clients, connectHTTP(t, url, aliceKey))
	}
	return rs
}

// trip opens replica i's breaker of hostile with two timed-out calls, and
// checks that it then refuses on its own.
func (rs *replicaSet) trip(t *testing.T, i int) {
	t.Helper()
	for range 2 {
		if env := rs.call(t, i, "hostile__sleep", `{"ms":60000}`); env["error_code"] != "tool_timeout" {
			t.Fatalf("replica %d: a long sleep: %v, want tool_timeout", i, env)
		}
	}
	rs.refused(t, i)
}

// refused checks that replica i refuses a call to hostile because its
// breaker is open, without the upstream seeing an attempt.
func (rs *replicaSet) refused(t *testing.T, i int) {
	t.Helper()
	before := rs.attempts(t, i)
	env := rs.call(t, i, "hostile__echo", `{}`)
	if env["error_code"] != "upstream_unavailable" || env["retryable"] != true || !strings.Contains(fmt.Sprint(env["message"]), "circuit open") {
		t.Fatalf("replica %d with the breaker open: %v", i, env)
	}
	if after := rs.attempts(t, i); after != before {
		t.Fatalf("replica %d: a refused call reached the upstream (%d attempts, then %d)", i, before, after)
	}
}

// passes checks that replica i runs a call to hostile.
func (rs *replicaSet) passes(t *testing.T, i int) {
	t.Helper()
	if env := rs.call(t, i, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("replica %d: echo: %v", i, env)
	}
}

// attempts is how many attempts replica i sent to hostile, by its metrics.
func (rs *replicaSet) attempts(t *testing.T, i int) int {
	t.Helper()
	_, body := scrape(t, rs.admins[i], "/metrics", adminKey)
	n := 0
	for _, line := range strings.Split(grepLines(body, "toolgate_upstream_request_duration_seconds_count{"), "\n") {
		if strings.Contains(line, `server="hostile"`) {
			v, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// metric is the line of replica i's /metrics that starts with name.
func (rs *replicaSet) metric(t *testing.T, i int, name string) string {
	t.Helper()
	_, body := scrape(t, rs.admins[i], "/metrics", adminKey)
	return grepLines(body, name)
}

// waitBreaker waits until replica i's breaker of hostile reads state in
// its metrics (2 open, 1 half-open, 0 closed).
func (rs *replicaSet) waitBreaker(t *testing.T, i int, state int) {
	t.Helper()
	want := fmt.Sprintf(`toolgate_breaker_state{server="hostile"} %d`, state)
	rs.waitFor(t, func() bool { return rs.metric(t, i, want) == want }, "replica %d: breaker state %d", i, state)
}

// recovers waits until replica i runs a call to hostile again: once the
// opening is over, the probe passes and closes the breaker. The calls
// before that are refused.
func (rs *replicaSet) recovers(t *testing.T, i int) {
	t.Helper()
	rs.waitFor(t, func() bool {
		env := rs.call(t, i, "hostile__echo", `{}`)
		if env["ok"] != true && env["error_code"] != "upstream_unavailable" {
			t.Fatalf("replica %d while waiting for the breaker to close: %v", i, env)
		}
		return env["ok"] == true
	}, "replica %d: calls to hostile never ran again", i)
	rs.waitBreaker(t, i, 0)
}

// waitFor polls cond until it holds, within replicaDeadline.
func (rs *replicaSet) waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(replicaDeadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("not in time: "+format, args...)
		}
	}
}

// Three replicas share one Redis: failures seen on replica 0 open its
// breaker of hostile, and replicas 1 and 2, which saw none, then refuse
// calls to hostile too (upstream_unavailable, nothing sent) until the
// opening is over, when each probes on its own and closes. With Redis
// killed, a breaker still opens on the replica that saw the failures, and
// only there; once Redis is back (no restart), openings are shared again.
func TestReplicasShareBreaker(t *testing.T) {
	rs := startBreakerReplicas(t, 3)
	for i := range 3 {
		rs.passes(t, i)
	}

	rs.trip(t, 0)
	for _, i := range []int{1, 2} {
		rs.waitBreaker(t, i, 2)
		rs.refused(t, i)
	}
	for i := range 3 {
		rs.recovers(t, i)
	}

	rs.redis.Kill()
	rs.waitReady(t, false, "state: the shared state store (Redis) is unreachable")
	rs.trip(t, 1)
	rs.passes(t, 0)
	rs.passes(t, 2)
	if line := rs.metric(t, 1, `toolgate_state_errors_total{feature="breaker"}`); line == "" || strings.HasSuffix(line, " 0") {
		t.Errorf("breaker errors with Redis down: %q", line)
	}
	rs.recovers(t, 1) // before Redis is back: an opening that is over is not shared late

	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	rs.passes(t, 0)
	rs.trip(t, 2)
	for _, i := range []int{0, 1} {
		rs.waitBreaker(t, i, 2)
		rs.refused(t, i)
	}
}
