package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz/replay"
)

// policy diff --shadow reports the disagreements a shadow policy recorded on the trail of real
// calls through a gateway: grouped by principal and tool, with the direction, both rules, the
// counts and the time span; --json says the same; exit 1 with disagreements, 0 without (a window
// that holds none), 2 for --shadow with --against.
func TestPolicyDiffShadow(t *testing.T) {
	cfg, _, line := shadowSetup(t)
	dir := filepath.Dir(cfg)
	write(t, cfg, mustRead(t, cfg)+"authz: {shadow_policy: candidate.csv}\n")

	url, logs, _ := httpGatewayFull(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)
	shadowCalls(t, alice, bob)

	code, out, errOut := runPolicyCmd("diff", "--shadow", "--config", cfg)
	livePolicy, shadowPolicy := filepath.Join(dir, "policy.csv"), filepath.Join(dir, "candidate.csv")
	for _, want := range []string{
		"shadow policy: " + shadowPolicy,
		"6 call(s) read from ",
		": 5 disagreement(s) recorded (2 shadow_allows, 3 shadow_denies)",
		"\n  bob  hostile/echo  shadow_denies  3 call(s), ",
		fmt.Sprintf("    live:   allow by %s:%d\n    shadow: deny (no line: denied by default) (version ", livePolicy, line),
		"\n  bob  hostile/sleep  shadow_allows  2 call(s), ",
		fmt.Sprintf("    live:   deny (no line: denied by default)\n    shadow: allow by %s:%d (version ", shadowPolicy, line),
		"    first record: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 || strings.Contains(out, "alice") {
		t.Fatalf("exit %d (want 1), or alice's agreed call listed:\n%s%s", code, out, errOut)
	}

	code, out, _ = runPolicyCmd("diff", "--shadow", "--config", cfg, "--json", "--since", "1h")
	var rep struct {
		replay.ShadowReport
		Trails [][]string `json:"trails"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != 1 || rep.Calls != 6 || rep.Disagreed != 5 || rep.ShadowAllows != 2 || rep.ShadowDenies != 3 ||
		len(rep.Disagreements) != 2 || len(rep.Trails) != 1 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	echo, sleep := rep.Disagreements[0], rep.Disagreements[1]
	if echo.Principal != "bob" || echo.Tool != "hostile/echo" || echo.Direction != replay.ShadowDenies || echo.Calls != 3 ||
		echo.Live != (replay.Outcome{Decision: replay.Allow, Rule: fmt.Sprintf("%s:%d", livePolicy, line)}) ||
		echo.Shadow != (replay.Outcome{Decision: replay.Deny}) || len(echo.ShadowVersions) != 1 ||
		echo.First.IsZero() || echo.Last.Before(echo.First) || !strings.HasPrefix(echo.Example, filepath.Join(dir, "toolgate.audit.log")+":") {
		t.Errorf("--json: echo group %+v", echo)
	}
	if sleep.Tool != "hostile/sleep" || sleep.Direction != replay.ShadowAllows || sleep.Calls != 2 ||
		sleep.Shadow != (replay.Outcome{Decision: replay.Allow, Rule: fmt.Sprintf("%s:%d", shadowPolicy, line)}) {
		t.Errorf("--json: sleep group %+v", sleep)
	}

	// A window that ends before the calls holds no disagreement: exit 0.
	if code, out, _ := runPolicyCmd("diff", "--shadow", "--config", cfg, "--until", "2000-01-01"); code != 0 ||
		!strings.Contains(out, "0 call(s) read") || !strings.Contains(out, "no recorded call was decided otherwise by the shadow policy") {
		t.Fatalf("--until: exit %d\n%s", code, out)
	}
	// --shadow replays no candidate.
	if code, _, errOut := runPolicyCmd("diff", "--shadow", "--against", shadowPolicy, "--config", cfg); code != 2 || !strings.Contains(errOut, "takes no --against") {
		t.Fatalf("--shadow --against: exit %d\n%s", code, errOut)
	}
	// A trail that cannot be read: exit 2.
	if code, _, errOut := runPolicyCmd("diff", "--shadow", "--config", cfg, "--audit", filepath.Join(dir, "nothing-here.log")); code != 2 {
		t.Fatalf("--audit of nothing: exit %d\n%s", code, errOut)
	}
}
