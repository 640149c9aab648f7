package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/redistest"
)

// approvalPolicy: a count labelled "refund" needs a human approval.
const approvalPolicy = "a, caller, counter/count, call, label == 'refund'\n"

const refundCall = `{"label":"refund"}`

// requestID finds an approval request's ID in a message.
var requestID = regexp.MustCompile(`apr_[A-Za-z0-9_-]{22}`)

// adminOf is the approvals API client of replica i.
func (rs *replicaSet) adminOf(i int) *approvals.Client {
	return &approvals.Client{URL: rs.admins[i].URL, Key: adminKey}
}

// pendingOn lists the pending requests as replica i sees them.
func (rs *replicaSet) pendingOn(t *testing.T, i int) []approvals.Request {
	t.Helper()
	reqs, err := rs.adminOf(i).List(context.Background(), approvals.StatePending)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// needsApproval checks that env is approval_required naming one pending
// request, which every replica lists, and returns its ID.
func (rs *replicaSet) needsApproval(t *testing.T, env map[string]any) string {
	t.Helper()
	if env["error_code"] != "approval_required" || env["retryable"] != true {
		t.Fatalf("want approval_required, got %v", env)
	}
	var id string
	for i := range rs.gws {
		pending := rs.pendingOn(t, i)
		if len(pending) != 1 || (id != "" && pending[0].ID != id) {
			t.Fatalf("replica %d lists pending %+v", i, pending)
		}
		id = pending[0].ID
	}
	if !strings.Contains(fmt.Sprint(env["message"]), id) {
		t.Fatalf("the answer does not name request %s: %v", id, env["message"])
	}
	return id
}

// approveWithCLI runs `toolgate approvals approve ID` against replica i.
func (rs *replicaSet) approveWithCLI(t *testing.T, i int, id string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := approvalsCommand([]string{"approve", id, "--url", rs.admins[i].URL, "--key", adminKey, "--by", "carol"}, &out, &errOut, time.Now)
	return code, out.String() + errOut.String()
}

// An approval requested through one replica and granted through another
// (with the CLI) is consumed through a third exactly once; a second
// consumption attempt needs a new approval; and when every replica gets
// the approved call at once, exactly one of them runs it.
func TestReplicasShareApprovals(t *testing.T) {
	rs, counter := startCounterReplicas(t, 3, approvalPolicy, "")

	id := rs.needsApproval(t, rs.call(t, 0, "counter__count", refundCall))
	if again := rs.call(t, 1, "counter__count", refundCall); !strings.Contains(fmt.Sprint(again["message"]), id) {
		t.Fatalf("a repeat on another replica made another request: %v", again)
	}
	if code, out := rs.approveWithCLI(t, 1, id); code != 0 || !strings.Contains(out, id+" approved") {
		t.Fatalf("approve through replica 1: exit %d: %s", code, out)
	}
	if env := rs.call(t, 2, "counter__count", refundCall); env["ok"] != true || counter.Count("refund") != 1 {
		t.Fatalf("the approved call on replica 2: %v, %d executions", env, counter.Count("refund"))
	}
	for _, i := range []int{0, 1, 2} {
		reqs, err := rs.adminOf(i).List(context.Background())
		if err != nil || len(reqs) != 1 || reqs[0].State != approvals.StateUsed {
			t.Fatalf("replica %d after the approved call: %+v, %v", i, reqs, err)
		}
	}
	next := rs.needsApproval(t, rs.call(t, 0, "counter__count", refundCall))
	if next == id || counter.Count("refund") != 1 {
		t.Fatalf("a second consumption attempt: request %s (first %s), %d executions", next, id, counter.Count("refund"))
	}

	// Other arguments (so that duplicate suppression does not replay the
	// call that ran): their own approval, which all three replicas race for.
	const other = `{"label":"refund","hold":false}`
	env := rs.call(t, 1, "counter__count", other)
	otherID := requestID.FindString(fmt.Sprint(env["message"]))
	if env["error_code"] != "approval_required" || otherID == "" || otherID == next {
		t.Fatalf("other arguments: %v", env)
	}
	if _, err := rs.adminOf(0).Approve(context.Background(), otherID, "carol"); err != nil {
		t.Fatal(err)
	}
	var calls []asyncCall
	for i := range rs.clients {
		calls = append(calls, callAsync(rs.clients[i], "counter__count", other))
	}
	ran := 0
	for _, c := range calls {
		switch env := c.wait(t); {
		case env["ok"] == true:
			ran++
		case env["error_code"] != "approval_required":
			t.Errorf("a racing call: %v", env)
		}
	}
	if ran != 1 || counter.Count("refund") != 2 {
		t.Fatalf("three replicas racing for one approval: %d ran, %d executions in all", ran, counter.Count("refund"))
	}
}

// Redis killed: a call that needs an approval is refused before it runs,
// even one that was approved (rate_limited, retryable, saying why), the
// admin API can neither decide nor list (503, and the CLI says why, never
// "no approval requests"), and the error
// metric counts it; after Redis restarts (empty: the approval is gone with
// it) the flow works again without restarting a gateway. Nothing runs
// twice.
func TestReplicasApprovalsRedisDown(t *testing.T) {
	rs, counter := startCounterReplicas(t, 3, approvalPolicy, "")
	id := rs.needsApproval(t, rs.call(t, 0, "counter__count", refundCall))
	if _, err := rs.adminOf(1).Approve(context.Background(), id, "carol"); err != nil {
		t.Fatal(err)
	}

	rs.redis.Kill()
	for i := range rs.gws {
		env := rs.call(t, i, "counter__count", refundCall)
		if env["error_code"] != "rate_limited" || env["retryable"] != true ||
			!strings.Contains(fmt.Sprint(env["message"]), "shared state store is unavailable") || strings.Contains(fmt.Sprint(env["message"]), "127.0.0.1") {
			t.Fatalf("replica %d with Redis down: %v", i, env)
		}
	}
	if counter.Count("refund") != 0 {
		t.Fatalf("%d executions with Redis down", counter.Count("refund"))
	}
	var apiErr *approvals.APIError
	if _, err := rs.adminOf(2).Approve(context.Background(), id, "carol"); !errors.As(err, &apiErr) || apiErr.Status != 503 {
		t.Fatalf("approve with Redis down: %v", err)
	}
	if code, out := rs.approveWithCLI(t, 2, id); code != 1 || !strings.Contains(out, "cannot reach its shared state store") {
		t.Fatalf("the CLI with Redis down: exit %d: %s", code, out)
	}
	// Listing cannot know what is waiting either: every replica answers 503 (never an empty or stale
	// list), and `toolgate approvals list` says why and exits non-zero, printing no table.
	for i := range rs.gws {
		if reqs, err := rs.adminOf(i).List(context.Background(), approvals.StatePending); !errors.As(err, &apiErr) || apiErr.Status != 503 {
			t.Fatalf("list on replica %d with Redis down: %+v, %v", i, reqs, err)
		}
		var out, errOut bytes.Buffer
		code := approvalsCommand([]string{"list", "--url", rs.admins[i].URL, "--key", adminKey}, &out, &errOut, time.Now)
		if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "cannot reach its shared state store") {
			t.Fatalf("`toolgate approvals list` on replica %d with Redis down: exit %d: %s%s", i, code, out.String(), errOut.String())
		}
	}
	if _, m := scrape(t, rs.admins[0], "/metrics", adminKey); strings.Contains(m, `toolgate_state_errors_total{feature="approvals"} 0`+"\n") ||
		!strings.Contains(m, `toolgate_state_errors_total{feature="approvals"}`) {
		t.Errorf("approval store errors not counted:\n%s", grepLines(m, "toolgate_state_"))
	}

	rs.redis.Restart()
	rs.waitReady(t, true, "ok")
	fresh := rs.needsApproval(t, rs.call(t, 1, "counter__count", refundCall))
	if code, out := rs.approveWithCLI(t, 2, fresh); code != 0 {
		t.Fatalf("approve after the restart: exit %d: %s", code, out)
	}
	if env := rs.call(t, 0, "counter__count", refundCall); env["ok"] != true {
		t.Fatalf("the approved call after the restart: %v", env)
	}
	rs.needsApproval(t, rs.call(t, 2, "counter__count", refundCall))
	if counter.Count("refund") != 1 {
		t.Fatalf("%d executions for one approval after the restart", counter.Count("refund"))
	}
}

// An approval consumed through one replica whose breaker is open is
// restored in the shared store (the call was never sent), and the client's
// retries, spread over the replicas, run the call once on it; the approval
// is then used on every replica, and a repeat needs a new one.
func TestReplicasApprovalRestoredAfterOpenBreaker(t *testing.T) {
	rs := &replicaSet{redis: redistest.Start(t),
		servers: stdioUpstream(t, "hostile", fmt.Sprintf("    breaker: {failures: 2, open_for: %s}\n    tools: {sleep: {timeout: 100ms, retry_safe: true}, echo: {retry_safe: true}}\n", breakerOpenFor))}
	seedDedupEpoch(t, rs.redis)
	for range 3 {
		cfg := writeConfig(t, rs.servers)
		write(t, cfg, mustRead(t, cfg)+replicaYAML(rs.redis))
		write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), testPolicy(rs.servers)+"a, caller, hostile/tick, call, label == 'refund'\n")
		url, _, gw := httpGatewayFull(t, cfg)
		admin := httptest.NewServer(gw.AdminHandler())
		t.Cleanup(admin.Close)
		rs.gws, rs.dirs, rs.urls, rs.admins = append(rs.gws, gw), append(rs.dirs, filepath.Dir(cfg)), append(rs.urls, url), append(rs.admins, admin)
		rs.clients = append(rs.clients, connectHTTP(t, url, aliceKey))
	}
	stateOn := func(i int, id string) approvals.State {
		t.Helper()
		reqs, err := rs.adminOf(i).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if r.ID == id {
				return r.State
			}
		}
		t.Fatalf("replica %d does not list %s", i, id)
		return ""
	}

	const refund = `{"label":"refund","ms":1}`
	id := rs.needsApproval(t, rs.call(t, 0, "hostile__tick", refund))
	if _, err := rs.adminOf(1).Approve(context.Background(), id, "carol"); err != nil {
		t.Fatal(err)
	}
	rs.trip(t, 0)
	env := rs.call(t, 0, "hostile__tick", refund)
	if msg := fmt.Sprint(env["message"]); env["error_code"] != "upstream_unavailable" || !strings.Contains(msg, "circuit open") ||
		!strings.Contains(msg, "approval (request "+id+") still stands") {
		t.Fatalf("the approved call through the open breaker: %v", env)
	}
	for i := range rs.gws {
		if st := stateOn(i, id); st != approvals.StateApproved {
			t.Fatalf("replica %d: the approval after the refusal: %s", i, st)
		}
	}
	// The client retries round-robin until a replica lets the call through
	// (the breaker state is shared, so possibly only after open_for): every
	// refusal keeps the approval.
	deadline := time.Now().Add(breakerOpenFor + 10*time.Second)
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	ranOn := -1
	for n := 1; ranOn < 0; n++ {
		env := rs.call(t, n, "hostile__tick", refund)
		switch {
		case env["ok"] == true:
			ranOn = n % len(rs.gws)
		case env["error_code"] != "upstream_unavailable" || !strings.Contains(fmt.Sprint(env["message"]), "still stands") || time.Now().After(deadline):
			t.Fatalf("retry %d of the approved call: %v", n, env)
		default:
			<-retry.C
		}
	}
	for i := range rs.gws {
		if st := stateOn(i, id); st != approvals.StateUsed {
			t.Fatalf("replica %d: the approval after the call ran on replica %d: %s", i, ranOn, st)
		}
	}
	if next := rs.needsApproval(t, rs.call(t, ranOn+1, "hostile__tick", refund)); next == id {
		t.Fatal("the approval was used twice")
	}
}
