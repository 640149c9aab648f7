package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pipeline"
)

// writeShadowGateway is writeGateway with authz.shadow_policy: candidate.csv, written with candidate.
func writeShadowGateway(t *testing.T, candidate string) (cfgPath, candidatePath string) {
	t.Helper()
	cfgPath = writeGateway(t, "", "authz: {shadow_policy: candidate.csv}\n")
	candidatePath = filepath.Join(filepath.Dir(cfgPath), "candidate.csv")
	write(t, candidatePath, candidate)
	return cfgPath, candidatePath
}

// A shadow policy that is missing or does not load stops the start, naming the config file, the
// key and what was expected (and, for a file that does not load, the file and line of each
// problem, as for the live policy).
func TestShadowPolicyRefusedAtStart(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		cfgPath := writeGateway(t, "", "authz: {shadow_policy: candidate.csv}\n")
		_, err := New(context.Background(), Options{ConfigPath: cfgPath})
		var se *StartError
		if !errors.As(err, &se) || se.What != "invalid configuration" {
			t.Fatalf("New: %v, want invalid configuration", err)
		}
		for _, want := range []string{cfgPath + ":", "authz.shadow_policy: expected a candidate policy file", "candidate.csv, which does not exist"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})
	t.Run("does not load", func(t *testing.T) {
		cfgPath, candidatePath := writeShadowGateway(t, "p, alice, echoes/*, call, maybe\np, alice, nowhere/*, call, allow\n")
		_, err := New(context.Background(), Options{ConfigPath: cfgPath})
		var se *StartError
		if !errors.As(err, &se) || se.What != "invalid shadow policy" {
			t.Fatalf("New: %v, want invalid shadow policy", err)
		}
		for _, want := range []string{cfgPath + ": authz.shadow_policy: expected a candidate policy that loads with",
			candidatePath + ":1: ", candidatePath + ":2: "} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})
	t.Run("the live policy", func(t *testing.T) {
		cfgPath := writeGateway(t, "", "authz: {shadow_policy: policy.csv}\n")
		_, err := New(context.Background(), Options{ConfigPath: cfgPath})
		if err == nil || !strings.Contains(err.Error(), "authz.shadow_policy: expected a candidate policy file other than the live one") {
			t.Fatalf("New: %v", err)
		}
	})
}

// The shadow policy reloads when its file changes and on SIGHUP (Reload), keeps its last good
// version when the file breaks, and the gateway's chain compares every call with the version in
// force; the live policy is never touched.
func TestShadowPolicyReloads(t *testing.T) {
	cfgPath, candidatePath := writeShadowGateway(t, "p, alice, echoes/*, call, allow\n")
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: cfgPath, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	live := gw.Policy().Current()
	first := gw.Shadow().Current()
	echo := pipeline.Call{Subject: authz.Subject{Principal: "alice"}, Name: "echoes__echo", Args: json.RawMessage(`{"said":"hi"}`)}
	callEcho := func() {
		t.Helper()
		if res := gw.chain.Handle(context.Background(), echo); res.IsError {
			t.Fatalf("echoes__echo failed: %+v", res)
		}
	}
	disagreements := func() string {
		rec := httptest.NewRecorder()
		gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for l := range strings.Lines(rec.Body.String()) {
			if strings.HasPrefix(l, `toolgate_policy_shadow_disagreements_total{direction="shadow_denies",tool="echoes/echo"}`) {
				return strings.TrimSpace(l[strings.LastIndexByte(l, ' '):])
			}
		}
		return "0"
	}
	callEcho()
	if n := disagreements(); n != "0" {
		t.Fatalf("an agreeing shadow counted %s disagreements", n)
	}

	// SIGHUP: the file is read again.
	write(t, candidatePath, "p, alice, echoes/*, call, allow\np, alice, echoes/echo, call, deny\n")
	gw.Reload()
	second := gw.Shadow().Current()
	if second.Version() == first.Version() {
		t.Fatal("Reload did not reload the shadow policy")
	}
	callEcho()
	if n := disagreements(); n != "1" {
		t.Fatalf("after the reload: %s disagreements, want 1", n)
	}

	// A broken file keeps the last good shadow.
	write(t, candidatePath, "p, alice, echoes/*, call, perhaps\n")
	gw.Reload()
	if gw.Shadow().Current() != second {
		t.Fatal("a broken shadow file replaced the last good shadow policy")
	}

	// A file change is picked up by the watch.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw.Watch(ctx)
	logs.Await(t, "watching the policy for changes", 2) // the live policy's watch and the shadow's: on before the file changes
	write(t, candidatePath, "p, alice, echoes/echo, call, allow\n")
	deadline := time.Now().Add(10 * time.Second)
	for gw.Shadow().Current() == second {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not reload the changed shadow file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	callEcho()
	if n := disagreements(); n != "1" {
		t.Fatalf("after the watched reload: %s disagreements, want still 1", n)
	}
	if gw.Policy().Current() != live {
		t.Fatal("reloading the shadow policy reloaded the live one")
	}
}

// A reload that drops a deny line writes a policy_reload record listing the line removed (and any
// added), and the principal/tool pairs of the catalog that gained or lost access, with the
// conditional ones marked.
func TestReloadReportDropsDenyLine(t *testing.T) {
	cfgPath := writeGateway(t, "", "")
	dir := filepath.Dir(cfgPath)
	policyPath := filepath.Join(dir, "policy.csv")
	const before = "p, alice, echoes/echo, call, deny\np, alice, echoes/*, call, allow\ng, bob, viewer\np, viewer, echoes/echo, call, allow\n"
	write(t, policyPath, before)
	gw, err := New(context.Background(), Options{ConfigPath: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if gw.Policy().Current().Denies() != 1 {
		t.Fatal("the deny line is not in force")
	}
	old := gw.Policy().Current().Version()
	// The deny line goes; viewers may call echoes/fail when its n is small; one line moves.
	write(t, policyPath, "p, alice, echoes/*, call, allow\np, viewer, echoes/echo, call, allow\ng, bob, viewer\np, viewer, echoes/fail, call, allow, n < 3\n")
	gw.Reload()
	gw.Close()

	var reloads []audit.Record
	f, err := os.Open(gw.Audit().Path())
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
		if r.Kind == audit.KindPolicyReload {
			reloads = append(reloads, r)
		}
	}
	if len(reloads) != 1 {
		t.Fatalf("policy_reload records: %+v", reloads)
	}
	d := reloads[0].Details
	strs := func(key string) string { return fmt.Sprint(d[key]) }
	if reloads[0].Decision != audit.DecisionApplied || d["previous_version"] != old || d["candidate_version"] != reloads[0].PolicyVersion {
		t.Errorf("record %+v", reloads[0])
	}
	if got, want := strs("lines_removed"), "[p, alice, echoes/echo, call, deny]"; got != want {
		t.Errorf("lines_removed %s, want %s", got, want)
	}
	if got, want := strs("lines_added"), "[p, viewer, echoes/fail, call, allow, n < 3]"; got != want {
		t.Errorf("lines_added %s, want %s (a moved line is not added)", got, want)
	}
	pairs := func(key string) []string {
		var out []string
		list, _ := d[key].([]any)
		for _, x := range list {
			m := x.(map[string]any)
			out = append(out, fmt.Sprintf("%s %s %s->%s", m["principal"], m["tool"], m["before"], m["after"]))
		}
		return out
	}
	gained := pairs("access_gained")
	for _, want := range []string{"alice echoes/echo denied->allowed", "bob echoes/fail denied->conditional"} {
		if !slices.Contains(gained, want) {
			t.Errorf("access_gained %v lacks %q", gained, want)
		}
	}
	if len(gained) != 2 {
		t.Errorf("access_gained %v, want exactly the two pairs", gained)
	}
	if lost := pairs("access_lost"); len(lost) != 0 {
		t.Errorf("access_lost %v, want none", lost)
	}
	if strs("removed_deny_lines") != fmt.Sprint([]any{policyPath + ":1: p, alice, echoes/echo, call, deny"}) {
		t.Errorf("removed_deny_lines %s", strs("removed_deny_lines"))
	}
}

// When the configured principals change (a key reload: Store.SetPrincipals on the live policy),
// the shadow policy follows, so a new principal that only p lines name is not a role to the shadow
// alone, which would deny it: a disagreement no edit of the candidate made.
func TestShadowFollowsTheConfiguredPrincipals(t *testing.T) {
	const policy = "p, alice, echoes/*, call, allow\np, erin, echoes/echo, call, allow\n"
	cfgPath, _ := writeShadowGateway(t, policy)
	write(t, filepath.Join(filepath.Dir(cfgPath), "policy.csv"), policy)
	gw, err := New(context.Background(), Options{ConfigPath: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, _, err := gw.Policy().SetPrincipals(append(gw.Policy().Current().Principals(), "erin")); err != nil {
		t.Fatal(err)
	}
	erin := pipeline.Call{Subject: authz.Subject{Principal: "erin"}, Name: "echoes__echo", Args: json.RawMessage(`{}`)}
	if res := gw.chain.Handle(context.Background(), erin); res.IsError {
		t.Fatalf("erin, now a configured principal, was refused: %+v", res)
	}
	rec := httptest.NewRecorder()
	gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if strings.Contains(rec.Body.String(), "toolgate_policy_shadow_disagreements_total{") {
		t.Fatalf("the shadow disagreed on erin's call: it kept the old principals")
	}
	if !slices.Contains(gw.Shadow().Current().Principals(), "erin") {
		t.Fatal("the shadow policy did not learn the principal")
	}
}
