package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/canonjson"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testupstream"
)

// startCounterReplicas is n gateways sharing one Redis and one counting
// upstream (testupstream.Counter, as server "counter", whose tool is not
// retry-safe), so executions are counted across replicas. Answers replay
// for a minute; policyExtra is appended to every replica's policy.
func startCounterReplicas(t *testing.T, n int, policyExtra, extra string) (*replicaSet, *testupstream.Counter) {
	t.Helper()
	counter := testupstream.StartCounter(t)
	rs := &replicaSet{redis: redistest.Start(t), servers: fmt.Sprintf("  counter:\n    url: %q\n    egress: {allow: [loopback]}\n", counter.URL)}
	seedDedupEpoch(t, rs.redis)
	for range n {
		cfg := writeConfig(t, rs.servers)
		body := strings.Replace(mustRead(t, cfg), "dedup: {window: 0s}", "dedup: {window: 1m}", 1)
		write(t, cfg, body+replicaYAML(rs.redis)+extra)
		write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), testPolicy(rs.servers)+policyExtra)
		url, logs, gw := httpGatewayFull(t, cfg)
		t.Cleanup(func() { // a refused call's reason (which store error) is in its replica's log
			if t.Failed() {
				t.Logf("replica %s log:\n%s", gw.Replica(), logs)
			}
		})
		admin := httptest.NewServer(gw.AdminHandler())
		t.Cleanup(admin.Close)
		rs.gws, rs.dirs, rs.urls, rs.admins = append(rs.gws, gw), append(rs.dirs, filepath.Dir(cfg)), append(rs.urls, url), append(rs.admins, admin)
		rs.clients, rs.reloads = append(rs.clients, connectHTTP(t, url, aliceKey)), append(rs.reloads, make(chan string, 1))
	}
	return rs, counter
}

// seedDedupEpoch marks the replicas' store as one in use for a while (not
// new, no data lost), so that duplicate suppression does not start with
// its quiet lease (dedup/redisstore): the tests that are not about it need not
// wait it out.
func seedDedupEpoch(t *testing.T, srv *redistest.Server) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), "replicas:dedup:epoch", "seeded", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// asyncCall is a call running on its own goroutine.
type asyncCall chan callOutcome

type callOutcome struct {
	env map[string]any
	err error
}

func callAsync(c *client.Client, tool, args string) asyncCall {
	out := make(asyncCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = jsonRaw(args)
		res, err := c.CallTool(ctx, req)
		if err != nil {
			out <- callOutcome{err: err}
			return
		}
		env, ok := res.StructuredContent.(map[string]any)
		if !ok {
			out <- callOutcome{err: fmt.Errorf("structuredContent is %T", res.StructuredContent)}
			return
		}
		out <- callOutcome{env: env}
	}()
	return out
}

func (a asyncCall) wait(t *testing.T) map[string]any {
	t.Helper()
	select {
	case r := <-a:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.env
	case <-time.After(replicaDeadline):
		t.Fatal("the call did not return")
	}
	return nil
}

// waitStarted waits until the counter runs a held call with label.
func waitStarted(t *testing.T, counter *testupstream.Counter, label string) {
	t.Helper()
	timeout := time.After(replicaDeadline)
	for {
		select {
		case got := <-counter.Started():
			if got == label {
				return
			}
		case <-timeout:
			t.Fatalf("no held call %q started", label)
		}
	}
}

// waitJoiners waits until n replicas have callers waiting in Redis for
// alice's call of counter/count with args (each replica follows the call's
// channel once, however many of its callers wait): from then on they can
// only be joined to it (they subscribed before looking again).
func waitJoiners(t *testing.T, rs *replicaSet, args string, n int64) {
	t.Helper()
	canonical, err := canonjson.Canonical([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	ch := "replicas:dedup:" + dedup.ArgsKey("alice", "counter/count", canonical).String() + ":done"
	rdb := redis.NewClient(&redis.Options{Addr: rs.redis.Addr()})
	defer rdb.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(replicaDeadline)
	for {
		got, err := rdb.PubSubNumSub(context.Background(), ch).Result()
		if err == nil && got[ch] == n {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d callers wait on %s, want %d (err %v)", got[ch], ch, n, err)
		}
	}
}

func dataOf(env map[string]any) string { return fmt.Sprint(env["data"]) }

// Three replicas, one counting upstream: a non-idempotent call in flight
// on one replica is joined by its duplicate sent to another, and replayed
// to a third after it finished; it executes once. Different arguments
// execute on their own.
func TestReplicasDeduplicate(t *testing.T) {
	rs, counter := startCounterReplicas(t, 3, "", "")
	held := `{"label":"refund-1","hold":true}`

	first := callAsync(rs.clients[0], "counter__count", held)
	waitStarted(t, counter, "refund-1")
	second := callAsync(rs.clients[1], "counter__count", held)
	waitJoiners(t, rs, held, 1)
	counter.Release("refund-1")
	a, b := first.wait(t), second.wait(t)
	if a["ok"] != true || b["ok"] != true || dataOf(a) != dataOf(b) || b["replayed"] == true || counter.Count("refund-1") != 1 {
		t.Fatalf("duplicate joined on another replica: %v / %v, %d executions", a, b, counter.Count("refund-1"))
	}

	c := rs.call(t, 2, "counter__count", ` { "hold" : true, "label" : "refund-1" } `)
	if c["ok"] != true || c["replayed"] != true || dataOf(c) != dataOf(a) || counter.Count("refund-1") != 1 {
		t.Fatalf("duplicate on a third replica after the call: %v, %d executions", c, counter.Count("refund-1"))
	}
	if d := rs.call(t, 2, "counter__count", `{"label":"refund-2"}`); d["ok"] != true || d["replayed"] == true || counter.Count("refund-2") != 1 {
		t.Fatalf("other arguments: %v, %d executions", d, counter.Count("refund-2"))
	}
	for i, how := range map[int]string{1: "joined", 2: "replayed"} {
		if _, m := scrape(t, rs.admins[i], "/metrics", adminKey); !strings.Contains(m, `toolgate_duplicates_suppressed_total{how="`+how+`",tool="counter/count"} 1`) {
			t.Errorf("replica %d does not count the %s duplicate:\n%s", i, how, grepLines(m, "toolgate_duplicates_suppressed_total"))
		}
	}
}

// Redis killed while a call runs: that call finishes and answers once;
// its duplicates and new calls of the tool are refused before they run
// (rate_limited, retryable, saying why), /readyz and the error metric say
// so; after Redis restarts, every replica suppresses duplicates again
// without a restart. Nothing runs twice.
func TestReplicasDedupRedisDown(t *testing.T) {
	rs, counter := startCounterReplicas(t, 3, "", "")
	held := `{"label":"during","hold":true}`
	first := callAsync(rs.clients[1], "counter__count", held)
	waitStarted(t, counter, "during")

	rs.redis.Kill()
	for _, i := range []int{0, 2} {
		for _, args := range []string{held, `{"label":"fresh"}`} {
			env := rs.call(t, i, "counter__count", args)
			if env["error_code"] != "rate_limited" || env["retryable"] != true ||
				!strings.Contains(fmt.Sprint(env["message"]), "shared state store is unavailable") || strings.Contains(fmt.Sprint(env["message"]), "127.0.0.1") {
				t.Fatalf("replica %d, %s, with Redis down: %v", i, args, env)
			}
		}
	}
	counter.Release("during")
	if env := first.wait(t); env["ok"] != true {
		t.Fatalf("the call in flight when Redis died: %v", env)
	}
	if counter.Count("during") != 1 || counter.Count("fresh") != 0 {
		t.Fatalf("executions with Redis down: during %d, fresh %d", counter.Count("during"), counter.Count("fresh"))
	}
	rs.waitReady(t, false, "state: the shared state store (Redis) is unreachable")
	if _, m := scrape(t, rs.admins[0], "/metrics", adminKey); strings.Contains(m, `toolgate_state_errors_total{feature="dedup"} 0`+"\n") ||
		!strings.Contains(m, `toolgate_state_errors_total{feature="dedup"}`) {
		t.Errorf("dedup errors not counted:\n%s", grepLines(m, "toolgate_state_"))
	}

	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	if env := rs.call(t, 1, "counter__count", `{"label":"fresh"}`); env["ok"] != true || env["replayed"] == true {
		t.Fatalf("a new call after the restart: %v", env)
	}
	if env := rs.call(t, 2, "counter__count", `{"label":"fresh"}`); env["ok"] != true || env["replayed"] != true {
		t.Fatalf("its duplicate on another replica: %v", env)
	}
	if env := rs.call(t, 1, "counter__count", held); env["ok"] != true || env["replayed"] != true {
		t.Fatalf("the call that ran during the outage, repeated on its replica: %v", env)
	}
	if counter.Count("fresh") != 1 || counter.Count("during") != 1 {
		t.Fatalf("executions after the restart: fresh %d, during %d", counter.Count("fresh"), counter.Count("during"))
	}
}

// Redis restarts empty while a non-idempotent call runs on replica 0: its
// duplicate sent to replica 1 after the restart finds no marker, yet it is
// not run. The store is recovering (dedup/redisstore's quiet lease), replica 0
// puts its marker back as soon as it sees Redis again, and the duplicate
// joins it: one execution, one answer for both. After the quiet lease, new
// calls run and are deduplicated again, with no gateway restarted.
func TestReplicasDedupRedisRestartsEmpty(t *testing.T) {
	rs, counter := startCounterReplicas(t, 3, "", "")
	held := `{"label":"across","hold":true}`
	first := callAsync(rs.clients[0], "counter__count", held)
	waitStarted(t, counter, "across")

	rs.redis.Kill()
	rs.waitReady(t, false, "state: the shared state store (Redis) is unreachable")
	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	dup := callAsync(rs.clients[1], "counter__count", held)
	waitJoiners(t, rs, held, 1) // replica 0's marker is back, and the duplicate waits on it
	counter.Release("across")
	a, b := first.wait(t), dup.wait(t)
	if a["ok"] != true || b["ok"] != true || dataOf(a) != dataOf(b) || counter.Count("across") != 1 {
		t.Fatalf("a duplicate sent after Redis restarted empty: %v / %v, %d executions", a, b, counter.Count("across"))
	}

	// Past the quiet lease (a new call waits it out), calls run once again.
	if env := rs.call(t, 2, "counter__count", `{"label":"after"}`); env["ok"] != true || env["replayed"] == true {
		t.Fatalf("a new call after the restart: %v", env)
	}
	if env := rs.call(t, 0, "counter__count", `{"label":"after"}`); env["ok"] != true || env["replayed"] != true {
		t.Fatalf("its duplicate on another replica: %v", env)
	}
	if counter.Count("after") != 1 || counter.Count("across") != 1 {
		t.Fatalf("executions: after %d, across %d", counter.Count("after"), counter.Count("across"))
	}
}
