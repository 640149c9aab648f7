package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
)

// A `toolgate serve` process with authz.shadow_policy, driven by real mcp-go clients: the calls
// the candidate decides otherwise are answered as the live policy decides, counted in
// toolgate_policy_shadow_disagreements_total by tool and direction (on /metrics), and carry the
// shadow field on their audit records; the calls it agrees on do not. Then a SIGHUP reload that
// drops the live policy's deny line is reported in the trail, and `toolgate policy history
// --config` shows it.
func TestShadowPolicyEndToEnd(t *testing.T) {
	cfg, live, _ := shadowSetup(t)
	dir := filepath.Dir(cfg)
	write(t, cfg, "listen: {http: \"127.0.0.1:0\"}\n"+mustRead(t, cfg)+
		fmt.Sprintf("admin: {listen: \"127.0.0.1:0\", key_sha256: %q}\nauthz: {shadow_policy: candidate.csv}\n", authn.HashKey(adminKey)))
	p := serveProcess(t, cfg)
	url := loggedURL(t, p, "serving Streamable HTTP")
	adminURL := loggedURL(t, p, "serving the admin API")
	trail, _ := waitLog(t, p, "writing the audit trail", 1)[0]["file"].(string)
	if trail == "" {
		t.Fatal("the gateway logged no audit trail file")
	}

	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)
	defer alice.Close()
	defer bob.Close()
	shadowCalls(t, alice, bob)

	req, _ := http.NewRequest(http.MethodGet, adminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`toolgate_policy_shadow_disagreements_total{direction="shadow_denies",tool="hostile/echo"} 3`,
		`toolgate_policy_shadow_disagreements_total{direction="shadow_allows",tool="hostile/sleep"} 2`,
	} {
		if !strings.Contains(body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if n := strings.Count(body.String(), "\ntoolgate_policy_shadow_disagreements_total{"); n != 2 {
		t.Errorf("%d disagreement series, want 2:\n%s", n, body.String())
	}
	// the gateway's log lines reach stderr a few ms late (internal/logsink): wait for them
	if n := len(waitLog(t, p, "shadow policy disagrees", 5)); n != 5 {
		t.Errorf("%d disagreements logged, want 5", n)
	}

	// SIGHUP after dropping the deny line: a reload report in the trail, and in policy history.
	write(t, filepath.Join(dir, "policy.csv"), strings.Replace(live, "p, caller, hostile/headers, call, deny\n", "", 1))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "policy reloaded", 1)
	// The reload's audit record is written by a reload hook, after that log
	// line: wait for it in the trail (a file, so polled, with a deadline).
	for deadline := time.Now().Add(30 * time.Second); ; {
		if data, err := os.ReadFile(trail); err == nil && bytes.Contains(data, []byte(`"kind":"policy_reload"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no policy_reload record in the trail 30s after the reload")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop(10e9)

	shadowed := map[string]int{}
	var reload *audit.Record
	f, err := os.Open(trail)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == audit.KindPolicyReload && r.Details["candidate_version"] != nil:
			// The reload that loaded the edited file. The file watcher may notice the same write
			// after SIGHUP has applied it and record one more reload, with nothing new to load (on
			// a loaded machine it does: seen in CI); that record is not the one checked here.
			reload = &r
		case r.Kind == audit.KindCall && r.Shadow != nil:
			s := r.Shadow
			if s.Version == "" || s.Decision == s.LiveDecision || (s.Decision == audit.DecisionDenied) != (r.Tool == "hostile/echo") {
				t.Errorf("%s's call of %s: shadow field %+v", r.Principal, r.Tool, *s)
			}
			shadowed[r.Principal+" "+r.Tool+" "+string(s.Decision)]++
		}
	}
	if fmt.Sprint(shadowed) != "map[bob hostile/echo denied:3 bob hostile/sleep allowed:2]" {
		t.Errorf("call records with a shadow field: %v", shadowed)
	}
	if reload == nil || reload.Decision != audit.DecisionApplied ||
		fmt.Sprint(reload.Details["lines_removed"]) != "[p, caller, hostile/headers, call, deny]" {
		t.Fatalf("reload record %+v", reload)
	}

	var out, errOut bytes.Buffer
	if code := policyHistory([]string{"--config", cfg}, &out, &errOut); code != 0 {
		t.Fatalf("policy history: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"  applied   ", "+0/−1 lines", "    - p, caller, hostile/headers, call, deny",
		"    gained: alice hostile/headers (denied → allowed)", "    gained: local hostile/headers (denied → allowed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("policy history lacks %q:\n%s", want, out.String())
		}
	}
}

// echoLine and sleepLine are the test policy's reader line for hostile/echo
// and the candidate's in its place.
const echoLine, sleepLine = "p, reader, hostile/echo, call, allow", "p, reader, hostile/sleep, call, allow"

// shadowSetup writes a config over the hostile test upstream and, beside
// its policy, candidate.csv: the same policy except that bob (reader) loses
// hostile/echo and gains hostile/sleep, on the same line (the line's
// number is returned). The config does not name the candidate yet.
func shadowSetup(t *testing.T) (cfg, live string, line int) {
	t.Helper()
	cfg = writeConfig(t, stdioUpstream(t, "hostile", ""))
	dir := filepath.Dir(cfg)
	live = mustRead(t, filepath.Join(dir, "policy.csv"))
	candidate := strings.Replace(live, echoLine, sleepLine, 1)
	if candidate == live {
		t.Fatal("the test policy changed: no reader line to move")
	}
	write(t, filepath.Join(dir, "candidate.csv"), candidate)
	return cfg, live, slices.Index(strings.Split(live, "\n"), echoLine) + 1
}

// shadowCalls makes the calls the candidate of shadowSetup decides
// otherwise (3 of bob's echoes it denies, 2 of his sleeps it allows), each
// answered as the live policy decides, and one both allow (alice's echo).
func shadowCalls(t *testing.T, alice, bob *client.Client) {
	t.Helper()
	for range 3 { // live allows, shadow denies
		if _, env := callE2E(t, bob, "hostile__echo", `{"who":"bob"}`); env["ok"] != true {
			t.Fatalf("bob's echo, which the live policy allows: %v", env)
		}
	}
	for range 2 { // live denies, shadow allows
		if _, env := callE2E(t, bob, "hostile__sleep", `{"ms":1}`); env["error_code"] != "tool_not_allowed" {
			t.Fatalf("bob's sleep, which the live policy denies: %v", env)
		}
	}
	if _, env := callE2E(t, alice, "hostile__echo", `{"who":"alice"}`); env["ok"] != true { // both allow
		t.Fatalf("alice's echo: %v", env)
	}
}
