package main

import (
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/internal/testupstream"

	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/authn"
)

// The gateway pages tools/list itself: every tool of a paginating upstream
// is in the catalog.
func TestUpstreamPagingFollowed(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "", "-extra-tools", "30", "-page-size", "7")))
	names := toolNames(t, connectHTTP(t, url, aliceKey))
	for i := 0; i < 30; i++ {
		if !contains(names, fmt.Sprintf("hostile__extra_%d", i)) {
			t.Fatalf("extra_%d missing from %d tools", i, len(names))
		}
	}
}

// initialize is bounded: an upstream that never answers is declared down
// after init_timeout and the others serve.
func TestHangingInitializeIsBounded(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "") + stdioUpstream(t, "hangs", "    init_timeout: 300ms\n", "-hang-init")
	cfg := writeConfig(t, servers)
	url, logs := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "hangs__echo", `{}`); env["error_code"] != "upstream_unavailable" {
		t.Errorf("hanging upstream: %v", env)
	}
	if _, env := callE2E(t, c, "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("healthy upstream: %v", env)
	}
	if !strings.Contains(logs.String(), "init_timeout 300ms") {
		t.Errorf("log does not say why:\n%s", logs)
	}
}

// Malformed JSON-RPC gets a JSON-RPC error; the same stdio session keeps working.
func TestMalformedJSONRPCOverStdio(t *testing.T) {
	cmd := exec.Command(self(t), "serve", "--stdio", "--config", writeConfig(t, stdioUpstream(t, "hostile", "")))
	cmd.Env = append(os.Environ(), execRole+"=toolgate", "GORACE=atexit_sleep_ms=0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	out := bufio.NewReader(stdout)
	send := func(line string) string {
		t.Helper()
		fmt.Fprintln(stdin, line)
		reply, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("no reply to %q: %v", line, err)
		}
		return reply
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if reply := send(`{"jsonrpc":"2.0","id":2,"method":`); !strings.Contains(reply, `"code":-32700`) {
		t.Errorf("truncated JSON: %s", reply)
	}
	if reply := send(`{"jsonrpc":"2.0","id":3,"method":"no/such/method"}`); !strings.Contains(reply, `"code":-32601`) {
		t.Errorf("unknown method: %s", reply)
	}
	reply := send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"hostile__echo","arguments":{"n":9007199254740993}}}`)
	if !strings.Contains(reply, `"ok":true`) || !strings.Contains(reply, "9007199254740993") {
		t.Errorf("session broken after bad input: %s", reply)
	}
}

// Over HTTP: garbage bodies and oversize bodies are refused; the gateway
// keeps serving.
func TestMalformedAndOversizeHTTPBodies(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	raw, _ := os.ReadFile(cfg)
	write(t, cfg, "listen: {max_body_bytes: 2048}\n"+string(raw))
	url, _ := httpGateway(t, cfg)
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"jsonrpc":`); code < 400 {
		t.Errorf("garbage body: status %d", code)
	}
	if code := post(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`); code < 400 {
		t.Errorf("oversize body: status %d", code)
	}
	if _, env := callE2E(t, connectHTTP(t, url, aliceKey), "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("gateway hurt by bad bodies: %v", env)
	}
}

// check reports every configuration problem with file and key, and exits non-zero.
func TestCheckReportsConfigProblems(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	write(t, path, "listen: {htp: x}\nmcpServers:\n  a__b: {command: x}\n  s: {command: x, timeout: fast}\n")
	var out bytes.Buffer
	if code := check(path, true, &out); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out.String())
	}
	for _, want := range []string{"toolgate.yaml:1: listen.htp", "mcpServers.a__b", "mcpServers.s.timeout"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, out.String())
		}
	}
}

// check reports a broken policy with file:line and exits non-zero.
func TestCheckReportsPolicyProblems(t *testing.T) {
	cfg := writeConfig(t, "")
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), "p, alice, orders/*, call, Allow\n")
	var out bytes.Buffer
	if code := check(cfg, true, &out); code != 1 || !strings.Contains(out.String(), "policy.csv:1") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

// check loads authz.shadow_policy as serve does, so a candidate with a bad
// line fails check with its file and line, not only the gateway's start.
func TestCheckReportsShadowPolicyProblems(t *testing.T) {
	cfg := writeConfig(t, "")
	dir := filepath.Dir(cfg)
	write(t, filepath.Join(dir, "candidate.csv"), "p, alice, orders/*, call, Allow\n")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, cfg, "authz: {shadow_policy: candidate.csv}\n"+string(data))
	var out bytes.Buffer
	if code := check(cfg, true, &out); code != 1 || !strings.Contains(out.String(), "shadow policy") ||
		!strings.Contains(out.String(), "candidate.csv:1") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

func TestKeysNew(t *testing.T) {
	cmd := exec.Command(self(t), "keys", "new", "dave")
	cmd.Env = append(os.Environ(), execRole+"=toolgate")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`tg_[A-Za-z0-9_-]{40,}`).FindString(string(out))
	if key == "" || !strings.Contains(string(out), fmt.Sprintf(`{principal: dave, sha256: "%s"}`, authn.HashKey(key))) {
		t.Fatalf("keys new output:\n%s", out)
	}
}

// SIGINT stops the gateway and every upstream it started.
func TestShutdownStopsUpstreams(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, portZero+mustRead(t, cfg))
	gw := serveProcess(t, cfg)
	children := childPIDs(t, gw.cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatal("no upstream child found")
	}
	gw.cmd.Process.Signal(os.Interrupt)
	select {
	case <-gw.done:
		if gw.err != nil {
			t.Fatalf("gateway exit: %v", gw.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not stop after SIGINT")
	}
	for _, pid := range children {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(state), ") Z") {
				t.Errorf("upstream %d outlived the gateway", pid)
			}
		}
	}
}

// childPIDs lists the direct children of pid.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	pids, err := testkit.ChildPIDs(pid)
	if err != nil {
		t.Skip(err)
	}
	return pids
}

// A dead HTTP upstream trips its breaker: from then on calls answer at once
// with the time until the next probe, and the live upstream is untouched.
func TestBreakerOpensEndToEnd(t *testing.T) {
	liveURL, stopLive, err := testupstream.StartHTTP(testupstream.Options{Name: "live"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopLive()
	deadURL, stopDead, err := testupstream.StartHTTP(testupstream.Options{Name: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopDead()
	// dead hangs (sleep past its 100ms timeout): every attempt is a
	// counted failure on a connection that is up. sleep is declared
	// retry-safe so that duplicate suppression leaves it alone.
	servers := fmt.Sprintf("  live:\n    url: %q\n    egress: {allow: [loopback]}\n  dead:\n    url: %q\n    egress: {allow: [loopback]}\n    breaker: {failures: 3, open_for: 1h}\n    tools: {sleep: {timeout: 100ms, retry_safe: true}}\n", liveURL, deadURL)
	url, logs := httpGateway(t, writeConfig(t, servers))
	c := connectHTTP(t, url, aliceKey)
	var env map[string]any
	for range 20 {
		if _, env = callE2E(t, c, "dead__sleep", `{"ms":5000}`); strings.Contains(fmt.Sprint(env["message"]), "circuit open") {
			break
		}
	}
	if env["error_code"] != "upstream_unavailable" || env["retryable"] != true || !strings.Contains(fmt.Sprint(env["message"]), "next attempt possible in") {
		t.Fatalf("breaker never opened: %v", env)
	}
	if !strings.Contains(logs.String(), `"to":"open"`) {
		t.Errorf("state change not logged:\n%s", logs)
	}
	if _, env := callE2E(t, c, "live__echo", `{}`); env["ok"] != true {
		t.Fatalf("live upstream hurt: %v", env)
	}
}

// An HTTP upstream that is gone is refused at once as upstream_unavailable
// while its supervisor reconnects: those refusals are no breaker failures
// (issue 16, item 3), the supervisor's backoff is the protection.
func TestDeadUpstreamRefusedWithoutBreakerEndToEnd(t *testing.T) {
	deadURL, stopDead, err := testupstream.StartHTTP(testupstream.Options{Name: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	url, logs := httpGateway(t, writeConfig(t, fmt.Sprintf("  dead:\n    url: %q\n    egress: {allow: [loopback]}\n    breaker: {failures: 3, open_for: 1h}\n    tools: {echo: {retry_safe: true}}\n", deadURL)))
	c := connectHTTP(t, url, aliceKey)
	stopDead()
	for i := range 10 {
		if _, env := callE2E(t, c, "dead__echo", `{}`); env["error_code"] != "upstream_unavailable" || env["retryable"] != true || strings.Contains(fmt.Sprint(env["message"]), "circuit") {
			t.Fatalf("call %d: %v", i, env)
		}
	}
	if strings.Contains(logs.String(), `"to":"open"`) {
		t.Errorf("the breaker opened on refusals while the upstream was known down:\n%s", logs)
	}
}

// A stdio upstream that stops reading its input cannot hold a call past its
// deadline: the blocked write is abandoned, the upstream is stopped, and
// its later calls answer upstream_unavailable at once.
func TestUpstreamThatStopsReadingIsStopped(t *testing.T) {
	url, logs := httpGateway(t, writeConfig(t, stdioUpstream(t, "stuck", "    timeout: 300ms\n")))
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "stuck__stop_reading", `{}`); env["ok"] != true {
		t.Fatalf("stop_reading: %v", env)
	}
	big := `{"pad":"` + strings.Repeat("x", 1<<19) + `"}` // far more than a 64 KiB pipe buffer, under limits.max_argument_bytes
	if _, env := callE2E(t, c, "stuck__echo", big); env["error_code"] != "tool_timeout" {
		t.Fatalf("blocked write: %v, want tool_timeout", env)
	}
	if _, env := callE2E(t, c, "stuck__echo", `{}`); env["error_code"] != "upstream_unavailable" {
		t.Fatalf("after the stuck upstream was stopped: %v", env)
	}
	if !strings.Contains(logs.String(), "stopped reading its input") {
		t.Errorf("not logged:\n%s", logs)
	}
}
