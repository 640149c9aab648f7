package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/gateway"
)

const adminKey = "tg_test_admin"

// approvalGateway: alice may call hostile/tick, but a tick labelled
// "refund" needs a human approval; the admin API runs beside it.
func approvalGateway(t *testing.T) (url string, admin *approvals.Client, gw *gateway.Gateway) {
	t.Helper()
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	write(t, cfg, mustRead(t, cfg)+fmt.Sprintf("admin: {key_sha256: %q}\n", authn.HashKey(adminKey)))
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), testPolicy(servers)+"a, caller, hostile/tick, call, label == 'refund'\n")
	url, _, gw = httpGatewayFull(t, cfg)
	srv := httptest.NewServer(approvals.Handler(gw.Approvals(), gw.Config().AdminKeySHA256(), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return url, &approvals.Client{URL: srv.URL, Key: adminKey}, gw
}

func pendingIDs(t *testing.T, admin *approvals.Client) []string {
	t.Helper()
	reqs, err := admin.List(context.Background(), approvals.StatePending)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range reqs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Through a real client and a real upstream that counts its executions: an
// approval-required call never runs; approved, the same call runs exactly
// once; the next repeat needs a new approval; other arguments need their
// own; a denial is final; calls without the condition run freely.
func TestApprovalFlowEndToEnd(t *testing.T) {
	url, admin, _ := approvalGateway(t)
	c := connectHTTP(t, url, aliceKey)
	refund := `{"label":"refund","ms":1}`
	executions := func() string {
		_, env := callE2E(t, c, "hostile__tick", fmt.Sprintf(`{"label":"count-%d"}`, time.Now().UnixNano()))
		return fmt.Sprint(env["data"].(map[string]any)["executions"])
	}
	if got := executions(); got != "1" {
		t.Fatalf("a call without the condition: executions %s", got)
	}
	_, env := callE2E(t, c, "hostile__tick", refund)
	ids := pendingIDs(t, admin)
	if env["error_code"] != "approval_required" || env["retryable"] != true || len(ids) != 1 || !strings.Contains(fmt.Sprint(env["message"]), ids[0]) {
		t.Fatalf("first call: %v, pending %v", env, ids)
	}
	callE2E(t, c, "hostile__tick", refund) // repeating before approval creates no second request
	if again := pendingIDs(t, admin); len(again) != 1 {
		t.Fatalf("pending after a repeat: %v", again)
	}
	if got := executions(); got != "2" {
		t.Fatalf("the approval-required call ran: executions %s", got)
	}
	if _, err := admin.Approve(context.Background(), ids[0], "carol"); err != nil {
		t.Fatal(err)
	}
	if _, env = callE2E(t, c, "hostile__tick", refund); env["ok"] != true {
		t.Fatalf("approved call: %v", env)
	}
	if _, env = callE2E(t, c, "hostile__tick", refund); env["error_code"] != "approval_required" {
		t.Fatalf("second repeat after one approval: %v", env)
	}
	if got := executions(); got != "4" {
		t.Fatalf("executions %s, want the approved call counted once", got)
	}
	_, env = callE2E(t, c, "hostile__tick", `{"label":"refund","ms":2}`)
	if env["error_code"] != "approval_required" || len(pendingIDs(t, admin)) != 2 {
		t.Fatalf("changed arguments need their own approval: %v", env)
	}
	if code := run([]string{"approvals", "list", "--url", admin.URL, "--key", adminKey}); code != 0 {
		t.Fatalf("toolgate approvals list: exit %d", code)
	}
	if code := run([]string{"approvals", "list", "--url", admin.URL, "--key", "wrong"}); code == 0 {
		t.Fatal("toolgate approvals list with a wrong key succeeded")
	}
	for _, id := range pendingIDs(t, admin) {
		if code := run([]string{"approvals", "deny", id, "--reason", "not this one", "--url", admin.URL, "--key", adminKey}); code != 0 {
			t.Fatalf("toolgate approvals deny: exit %d", code)
		}
	}
	if _, env = callE2E(t, c, "hostile__tick", refund); env["error_code"] != "approval_denied" || !strings.Contains(fmt.Sprint(env["message"]), "not this one") {
		t.Fatalf("denied call: %v", env)
	}
}

// Pending approvals survive a restart: they live in the approvals file.
func TestPendingApprovalsSurviveRestart(t *testing.T) {
	url, _, gw := approvalGateway(t)
	callE2E(t, connectHTTP(t, url, aliceKey), "hostile__tick", `{"label":"refund"}`)
	reopened, err := approvals.Open(gw.Config().ApprovalsPath(), time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if reqs := listed(t, reopened, approvals.StatePending); len(reqs) != 1 || reqs[0].Principal != "alice" || reqs[0].Tool != "hostile/tick" {
		t.Fatalf("after reopening: %+v", reqs)
	}
}

// An approved call refused because its upstream's breaker is open was
// never sent: its approval is restored (the refusal says so, and the
// audit trail records it), and once the breaker lets calls through again
// the same call runs, once, without a new approval. An approved call that
// did reach the upstream (here: it timed out there) uses up its approval
// for good.
func TestApprovalRestoredAfterOpenBreaker(t *testing.T) {
	servers := stdioUpstream(t, "hostile", fmt.Sprintf(
		"    breaker: {failures: 2, open_for: %s}\n    tools: {sleep: {timeout: 100ms, retry_safe: true}, tick: {timeout: 300ms}}\n", breakerOpenFor))
	cfg := writeConfig(t, servers)
	write(t, cfg, mustRead(t, cfg)+fmt.Sprintf("admin: {key_sha256: %q}\n", authn.HashKey(adminKey)))
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), testPolicy(servers)+"a, caller, hostile/tick, call, label == 'refund'\n")
	url, _, gw := httpGatewayFull(t, cfg)
	srv := httptest.NewServer(approvals.Handler(gw.Approvals(), gw.Config().AdminKeySHA256(), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	admin := &approvals.Client{URL: srv.URL, Key: adminKey}
	c := connectHTTP(t, url, aliceKey)
	stateOf := func(id string) approvals.State {
		t.Helper()
		reqs, err := admin.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if r.ID == id {
				return r.State
			}
		}
		t.Fatalf("request %s not listed", id)
		return ""
	}
	approved := func(args string) string {
		t.Helper()
		_, env := callE2E(t, c, "hostile__tick", args)
		id := requestID.FindString(fmt.Sprint(env["message"]))
		if env["error_code"] != "approval_required" || id == "" {
			t.Fatalf("%s: %v", args, env)
		}
		if _, err := admin.Approve(context.Background(), id, "carol"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	executions := func() string { // a tick that needs no approval reports how many ticks ran
		_, env := callE2E(t, c, "hostile__tick", fmt.Sprintf(`{"label":"count-%d"}`, time.Now().UnixNano()))
		if env["ok"] != true {
			t.Fatalf("counting ticks: %v", env)
		}
		return fmt.Sprint(env["data"].(map[string]any)["executions"])
	}
	if got := executions(); got != "1" {
		t.Fatalf("executions %s before any approval", got)
	}

	const refund = `{"label":"refund","ms":1}`
	id := approved(refund)
	for range 2 { // two timed-out calls open the breaker
		if _, env := callE2E(t, c, "hostile__sleep", `{"ms":60000}`); env["error_code"] != "tool_timeout" {
			t.Fatalf("a long sleep: %v", env)
		}
	}
	_, env := callE2E(t, c, "hostile__tick", refund)
	msg := fmt.Sprint(env["message"])
	if env["error_code"] != "upstream_unavailable" || env["retryable"] != true || !strings.Contains(msg, "circuit open") ||
		!strings.Contains(msg, "approval (request "+id+") still stands") {
		t.Fatalf("the approved call with the breaker open: %v", env)
	}
	if st := stateOf(id); st != approvals.StateApproved {
		t.Fatalf("the approval after the refusal: %s", st)
	}
	// The client retries until the breaker lets the call through: every
	// refusal keeps the approval, and the call then runs on it.
	deadline := time.Now().Add(breakerOpenFor + 10*time.Second)
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		_, env = callE2E(t, c, "hostile__tick", refund)
		if env["ok"] == true {
			break
		}
		if env["error_code"] != "upstream_unavailable" || !strings.Contains(fmt.Sprint(env["message"]), "still stands") || time.Now().After(deadline) {
			t.Fatalf("retrying the approved call: %v", env)
		}
		<-retry.C
	}
	if st := stateOf(id); st != approvals.StateUsed {
		t.Fatalf("the approval after the call ran: %s", st)
	}
	if got := executions(); got != "3" {
		t.Fatalf("executions %s, want the approved call counted once", got)
	}
	if _, env = callE2E(t, c, "hostile__tick", refund); env["error_code"] != "approval_required" || strings.Contains(fmt.Sprint(env["message"]), id) {
		t.Fatalf("a repeat after the approved call ran: %v", env)
	}

	const slow = `{"label":"refund","ms":60000}`
	slowID := approved(slow)
	if _, env = callE2E(t, c, "hostile__tick", slow); env["error_code"] != "tool_timeout" {
		t.Fatalf("the approved call that timed out upstream: %v", env)
	}
	if st := stateOf(slowID); st != approvals.StateUsed {
		t.Fatalf("the approval of a call that reached the upstream: %s", st)
	}
	if _, env = callE2E(t, c, "hostile__tick", slow); env["error_code"] != "approval_required" || strings.Contains(fmt.Sprint(env["message"]), slowID) {
		t.Fatalf("a repeat of the call that reached the upstream: %v", env)
	}

	var restores int
	for _, r := range auditRecords(t, gw.Config().AuditPath()) {
		if r.Kind == audit.KindApproval && r.Reason == approvals.RestoredReason {
			if r.Details["id"] != id || r.Decision != audit.DecisionApproved {
				t.Errorf("restore record: %+v", r)
			}
			restores++
		}
	}
	if restores == 0 {
		t.Error("no restore in the audit trail")
	}
}

// listed is s.List, failing the test when the store cannot be read.
func listed(t *testing.T, s approvals.Store, states ...approvals.State) []approvals.Request {
	t.Helper()
	reqs, err := s.List(states...)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return reqs
}

// unreachableStore is an approvals store whose List fails as a shared store that cannot be reached
// does (approvals/redisstore with Redis down).
type unreachableStore struct{ approvals.Store }

func (unreachableStore) List(...approvals.State) ([]approvals.Request, error) {
	return nil, fmt.Errorf("%w: dial tcp 127.0.0.1:6379: connect: connection refused", approvals.ErrUnavailable)
}

// `toolgate approvals list` while the store cannot be read, with a request pending: the admin API
// answers 503 and the CLI says that it cannot tell what is waiting, exits 1 and prints no table,
// never "no approval requests".
func TestApprovalsListStoreDown(t *testing.T) {
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: "h1", Args: json.RawMessage(`{}`), Rule: "policy.csv:1"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(approvals.Handler(unreachableStore{store}, authn.HashKey(adminKey), slog.New(slog.DiscardHandler)))
	defer srv.Close()
	for _, args := range [][]string{{"list"}, {"list", "--all"}} {
		var out, errOut bytes.Buffer
		code := approvalsCommand(append(args, "--url", srv.URL, "--key", adminKey), &out, &errOut, time.Now)
		if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "cannot reach its shared state store") ||
			!strings.Contains(errOut.String(), "cannot tell which calls are waiting") {
			t.Errorf("%v with the store down: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

// Without --url, `toolgate approvals` talks to the admin.listen of --config (default toolgate.yaml);
// --url wins over it; a config that cannot be read, or whose admin.listen is port 0, is an error naming
// --url, and only a missing default toolgate.yaml falls back to the default admin address.
func TestApprovalsAdminURLFromConfig(t *testing.T) {
	store, err := approvals.Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, pending, err := store.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: "h1", Args: json.RawMessage(`{}`), Rule: "policy.csv:1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(approvals.Handler(store, authn.HashKey(adminKey), slog.New(slog.DiscardHandler)))
	defer srv.Close()
	configWith := func(listen string) string {
		cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
		write(t, cfg, mustRead(t, cfg)+fmt.Sprintf("admin: {listen: %q, key_sha256: %q}\n", listen, authn.HashKey(adminKey)))
		return cfg
	}
	cfg := configWith(srv.Listener.Addr().String())
	closed, port0 := configWith("127.0.0.1:1"), configWith("127.0.0.1:0")
	wildcards := []struct{ listen, want string }{
		{"0.0.0.0:9001", "http://127.0.0.1:9001"},
		{":9001", "http://127.0.0.1:9001"},
		{"[::]:9001", "http://[::1]:9001"},
		{"[::1]:9001", "http://[::1]:9001"},
		{"10.1.2.3:9001", "http://10.1.2.3:9001"},
	}
	wildcardConfigs := map[string]string{}
	for _, c := range wildcards {
		wildcardConfigs[c.listen] = configWith(c.listen) // before t.Chdir: writeConfig reads ../../model.conf
	}
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := approvalsCommand(append(args, "--key", adminKey), &out, &errOut, time.Now)
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := cli("list", "--config", cfg); code != 0 || !strings.Contains(out, pending.ID) {
		t.Fatalf("list with admin.listen from --config: exit %d: %s%s", code, out, errOut)
	}
	t.Chdir(filepath.Dir(cfg)) // toolgate.yaml, the default --config
	if code, out, errOut := cli("list"); code != 0 || !strings.Contains(out, pending.ID) {
		t.Fatalf("list with admin.listen from ./toolgate.yaml: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := cli("list", "--config", closed, "--url", srv.URL); code != 0 || !strings.Contains(out, pending.ID) {
		t.Fatalf("--url over admin.listen: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := cli("list", "--config", closed); code != exitUnreachable || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("list against admin.listen 127.0.0.1:1: exit %d: %s", code, errOut)
	}
	if code, _, errOut := cli("list", "--config", port0); code != 2 || !strings.Contains(errOut, "--url") {
		t.Fatalf("admin.listen on port 0: exit %d: %s", code, errOut)
	}
	if code, _, errOut := cli("list", "--config", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 || !strings.Contains(errOut, "--url") {
		t.Fatalf("a missing --config: exit %d: %s", code, errOut)
	}
	for _, c := range wildcards {
		if got, err := adminURL("", wildcardConfigs[c.listen], true); got != c.want || err != nil {
			t.Errorf("admin.listen %q: %q, %v, want %q", c.listen, got, err, c.want)
		}
	}
	t.Chdir(t.TempDir()) // no toolgate.yaml here
	if got, err := adminURL("", "toolgate.yaml", false); got != "http://127.0.0.1:8081" || err != nil {
		t.Errorf("without a config: %q, %v", got, err)
	}
}
