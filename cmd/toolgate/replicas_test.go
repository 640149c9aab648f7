package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/redistest"
)

// replicaDeadline bounds every wait for the replicas to converge or
// recover: the store's health check backs off to 2s at most.
const replicaDeadline = 20 * time.Second

// replicaSet is several in-process gateways sharing one Redis, each with
// its own config directory (so its own audit trail and upstream process)
// and the same policy content.
type replicaSet struct {
	redis   *redistest.Server
	gws     []*gateway.Gateway
	dirs    []string
	urls    []string // /mcp of each replica
	admins  []*httptest.Server
	clients []*client.Client // alice, one session per replica
	reloads []chan string    // each replica's policy version after every reload
	servers string
}

// replicaYAML is what every replica's config adds: the admin key, and the
// shared store at srv under the replicas' key prefix.
//
// op_timeout is 2s rather than the 200ms default. The default bounds one
// round trip on a call's path to a Redis on the same network, and a reply
// later than that is rightly the store being unavailable: the call is
// refused (rate_limited), and a PING that late marks the store down. Here
// three gateways built with -race share one process, and 2 cores with
// whatever else runs: under `go test -race ./...` round trips to the loopback
// Redis were seen to take 165ms, and one timed out at 200ms ("read tcp
// ...: i/o timeout") in a stall of about 370ms, so a call that the test
// expects to need, or use, an approval was refused instead. A stall of the
// test machine says nothing about what these tests check; 2s leaves ten
// times the margin. A killed Redis still fails at once (connection refused
// or reset), not after the timeout.
func replicaYAML(srv *redistest.Server) string {
	return fmt.Sprintf("admin: {key_sha256: %q}\nstate:\n  redis: {url: %q, key_prefix: \"replicas:\", op_timeout: 2s}\n",
		authn.HashKey(adminKey), srv.URL())
}

func startReplicas(t *testing.T, n int, extra string) *replicaSet {
	t.Helper()
	rs := &replicaSet{redis: redistest.Start(t), servers: stdioUpstream(t, "hostile", "")}
	// A store in use for a while, not a new one: a new one makes duplicate
	// suppression wait out one quiet lease first (see dedup/redisstore).
	seedDedupEpoch(t, rs.redis)
	for range n {
		cfg := writeConfig(t, rs.servers)
		write(t, cfg, mustRead(t, cfg)+replicaYAML(rs.redis)+extra)
		url, _, gw := httpGatewayFull(t, cfg)
		admin := httptest.NewServer(gw.AdminHandler())
		t.Cleanup(admin.Close)
		ch := make(chan string, 64)
		gw.Policy().OnReload(func(p *authz.Policy, _ error) {
			select {
			case ch <- p.Version():
			default: // the waiter reads Current() anyway; a full channel loses nothing
			}
		})
		rs.gws, rs.dirs, rs.urls, rs.admins = append(rs.gws, gw), append(rs.dirs, filepath.Dir(cfg)), append(rs.urls, url), append(rs.admins, admin)
		rs.clients, rs.reloads = append(rs.clients, connectHTTP(t, url, aliceKey)), append(rs.reloads, ch)
	}
	return rs
}

// call sends the i-th call of a round-robin client: replica i mod n.
func (rs *replicaSet) call(t *testing.T, i int, tool, args string) map[string]any {
	t.Helper()
	_, env := callE2E(t, rs.clients[i%len(rs.clients)], tool, args)
	return env
}

// writePolicy gives every replica the same new policy file; nothing reloads yet.
func (rs *replicaSet) writePolicy(t *testing.T, extra string) {
	t.Helper()
	for _, dir := range rs.dirs {
		write(t, filepath.Join(dir, "policy.csv"), testPolicy(rs.servers)+extra)
	}
}

// waitPolicy waits until every replica runs version, woken by each
// replica's reloads rather than by a timer. It looks at the reload's
// stats, which GET /v1/policy reports: a reload updates them just after
// it swaps the policy in force, and before it calls OnReload.
func (rs *replicaSet) waitPolicy(t *testing.T, version string) {
	t.Helper()
	timeout := time.After(replicaDeadline)
	for i, gw := range rs.gws {
		for gw.Policy().Stats().Version != version {
			select {
			case <-rs.reloads[i]:
			case <-timeout:
				t.Fatalf("replica %d still runs policy %s, want %s", i, gw.Policy().Stats().Version, version)
			}
		}
		var info gateway.PolicyInfo
		if code, body := scrape(t, rs.admins[i], "/v1/policy", adminKey); code != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil ||
			info.Version != version || info.Rules != gw.Policy().Current().Rules() || info.LoadedAt.IsZero() || info.Replica != gw.Replica() {
			t.Errorf("replica %d: GET /v1/policy: %d %s", i, code, body)
		}
	}
}

// waitReady waits until every replica's /readyz answers ok (or fails
// naming want), polling the probe as a load balancer would.
func (rs *replicaSet) waitReady(t *testing.T, ok bool, want string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(replicaDeadline)
	for i, admin := range rs.admins {
		for {
			code, body := scrape(t, admin, "/readyz", "")
			if (code == http.StatusOK) == ok && strings.Contains(body, want) {
				break
			}
			select {
			case <-tick.C:
			case <-timeout:
				t.Fatalf("replica %d: /readyz %d %q, want ok=%v with %q", i, code, body, ok, want)
			}
		}
	}
}

// spend makes round-robin calls of hostile/tick and checks that exactly
// the first `allowed` of them run: the tool's bucket is one for all replicas.
func (rs *replicaSet) spend(t *testing.T, calls, allowed int) {
	t.Helper()
	for i := range calls {
		env := rs.call(t, i, "hostile__tick", fmt.Sprintf(`{"label":"%d"}`, i))
		switch {
		case i < allowed && env["ok"] != true:
			t.Fatalf("call %d (replica %d) within the shared burst: %v", i, i%len(rs.gws), env)
		case i >= allowed && (env["error_code"] != "rate_limited" || !strings.Contains(fmt.Sprint(env["message"]), "tool hostile/tick")):
			t.Fatalf("call %d (replica %d) past the shared burst: %v", i, i%len(rs.gws), env)
		}
	}
}

// Three replicas share one Redis: a tool's limit holds across them within
// its burst; one replica's policy reload reaches all; with Redis killed,
// limits fail open and /readyz says why; a reload made meanwhile is caught
// up; and after Redis restarts on its port everything works again without
// restarting a gateway.
func TestReplicasShareRedis(t *testing.T) {
	// dedup_on_failure: open, so that the calls made while Redis is down
	// show the rate limits' own failure behaviour (open by default).
	rs := startReplicas(t, 3, "  dedup_on_failure: open\nrate_limits:\n  tools:\n    hostile/tick: {rate: 1, per: 1h, burst: 5}\n")
	rs.waitReady(t, true, "ok")

	rs.spend(t, 8, 5)

	rs.writePolicy(t, "p, reader, hostile/fail, call, allow\n")
	if err := rs.gws[0].Policy().Reload(); err != nil {
		t.Fatal(err)
	}
	v2 := rs.gws[0].Policy().Current().Version()
	rs.waitPolicy(t, v2)
	bob := connectHTTP(t, rs.urls[2], bobKey)
	if _, env := callE2E(t, bob, "hostile__fail", `{}`); env["error_code"] != "tool_failed" {
		t.Fatalf("bob on replica 2 after the reload on replica 0: %v", env)
	}

	rs.redis.Kill()
	for i := range 3 { // the bucket is empty, but limits fail open
		if env := rs.call(t, i, "hostile__tick", fmt.Sprintf(`{"label":"open %d"}`, i)); env["ok"] != true {
			t.Fatalf("call %d with Redis down: %v", i, env)
		}
	}
	rs.waitReady(t, false, "state: the shared state store (Redis) is unreachable")
	// The gauge follows the readiness a moment later (the state client
	// reports the change after it records it).
	rs.waitMetric(t, 0, "toolgate_state_up 0\n")
	if _, metrics := scrape(t, rs.admins[0], "/metrics", adminKey); strings.Contains(metrics, `toolgate_state_errors_total{feature="rate_limits"} 0`+"\n") {
		t.Errorf("metrics with Redis down lack rate_limits errors:\n%s", grepLines(metrics, "toolgate_state_"))
	}
	// A reload while Redis is down cannot be announced yet.
	rs.writePolicy(t, "p, reader, hostile/fail, call, allow\np, reader, hostile/tick, call, allow\n")
	if err := rs.gws[1].Policy().Reload(); err != nil {
		t.Fatal(err)
	}
	v3 := rs.gws[1].Policy().Current().Version()

	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	rs.waitPolicy(t, v3)
	rs.spend(t, 6, 5) // Redis restarted empty: a full bucket, shared again
	rs.waitMetric(t, 2, "toolgate_state_up 1\n")
}

// waitMetric waits until replica i's /metrics has line, looking every 5 ms.
func (rs *replicaSet) waitMetric(t *testing.T, i int, line string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(replicaDeadline)
	for {
		_, metrics := scrape(t, rs.admins[i], "/metrics", adminKey)
		if strings.Contains(metrics, line) {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("replica %d's /metrics lacks %q:\n%s", i, line, grepLines(metrics, "toolgate_state_"))
		}
	}
}

// With rate_limits_on_failure: closed, a call that has a limit is refused
// while Redis is down (rate_limited, retryable), one without a limit runs,
// and limits work again once Redis is back.
func TestRateLimitsFailClosed(t *testing.T) {
	rs := startReplicas(t, 1, "  rate_limits_on_failure: closed\n  dedup_on_failure: open\nrate_limits:\n  tools:\n    hostile/tick: {rate: 1, per: 1h, burst: 2}\n")
	rs.redis.Kill()
	env := rs.call(t, 0, "hostile__tick", `{"label":"closed"}`)
	if env["error_code"] != "rate_limited" || env["retryable"] != true || !strings.Contains(fmt.Sprint(env["message"]), "cannot be checked right now") {
		t.Fatalf("a limited call with Redis down: %v", env)
	}
	if env := rs.call(t, 0, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("a call without a limit with Redis down: %v", env)
	}
	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	rs.spend(t, 3, 2)
}

// roundRobin is a load balancer without stickiness: each HTTP request
// goes to the next replica, whatever its Mcp-Session-Id.
type roundRobin struct {
	hosts []string
	mu    sync.Mutex
	next  int
	seen  map[string]int // requests per host carrying the session's ID
}

func (lb *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	lb.mu.Lock()
	host := lb.hosts[lb.next%len(lb.hosts)]
	lb.next++
	if r.Header.Get("Mcp-Session-Id") != "" {
		lb.seen[host]++
	}
	lb.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	return http.DefaultTransport.RoundTrip(r)
}

// One client whose requests a load balancer spreads over every replica
// still works, in both protocol eras: a 2025-11-25 session's requests carry
// its Mcp-Session-Id to replicas that never saw its initialize (they accept
// any well-formed ID and authenticate each request), and 2026-07-28 has no
// sessions at all. The tool's limit holds for the client as a whole.
func TestOneSessionAcrossReplicas(t *testing.T) {
	for _, version := range []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20260728} {
		t.Run(version, func(t *testing.T) {
			rs := startReplicas(t, 3, "rate_limits:\n  tools:\n    hostile/tick: {rate: 1, per: 1h, burst: 4}\n")
			lb := &roundRobin{seen: map[string]int{}}
			for _, u := range rs.urls {
				lb.hosts = append(lb.hosts, strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/mcp"))
			}
			c := connectBalanced(t, rs.urls[0], version, lb)
			if names := toolNames(t, c); !contains(names, "hostile__tick") {
				t.Fatalf("tools/list through the balancer: %v", names)
			}
			for i := range 6 {
				_, env := callE2E(t, c, "hostile__tick", fmt.Sprintf(`{"label":"lb %d"}`, i))
				if want := i < 4; (env["ok"] == true) != want || (!want && env["error_code"] != "rate_limited") {
					t.Fatalf("call %d through the balancer: %v", i, env)
				}
			}
			lb.mu.Lock()
			defer lb.mu.Unlock()
			if want := map[bool]int{true: len(rs.urls), false: 0}[version == mcp.ProtocolVersion20251125]; len(lb.seen) != want {
				t.Errorf("requests with a session ID reached %d replicas, want %d: %v", len(lb.seen), want, lb.seen)
			}
		})
	}
}

// connectBalanced is alice's client for version, every request of which
// goes through lb.
func connectBalanced(t *testing.T, url, version string, lb http.RoundTripper) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(&http.Client{Transport: lb}),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "balanced", Version: "1"}
	if _, err := c.Initialize(context.Background(), req); err != nil || c.ProtocolVersion() != version {
		t.Fatalf("initialize %s: %v (negotiated %s)", version, err, c.ProtocolVersion())
	}
	return c
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// check pings the shared store: reachable, or unreachable with the reason
// and a non-zero exit, and never the URL's password.
func TestCheckPingsRedis(t *testing.T) {
	rs := redistest.Start(t)
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	withRedis := func(url string) string {
		path := strings.TrimSuffix(cfg, ".yaml") + "-redis.yaml"
		write(t, path, mustRead(t, cfg)+fmt.Sprintf("state:\n  redis: {url: %q, dial_timeout: 200ms}\n", url))
		return path
	}
	var out strings.Builder
	if code := check(withRedis(rs.URL()), false, &out); code != 0 || !strings.Contains(out.String(), "state.redis: reachable") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	rs.Kill()
	out.Reset()
	down := strings.Replace(rs.URL(), "redis://", "redis://:hunter2@", 1)
	if code := check(withRedis(down), false, &out); code != 1 || !strings.Contains(out.String(), "state.redis: unreachable: ") ||
		strings.Contains(out.String(), "hunter2") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
