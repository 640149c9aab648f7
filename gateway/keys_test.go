package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/internal/testkit"
)

// configDiff names settings by their paths in the file, down to a map's key, never their values.
func TestConfigDiff(t *testing.T) {
	base := `listen: {http: "127.0.0.1:8080"}
auth:
  api_keys:
    - {principal: alice, sha256: "` + authn.HashKey("a") + `"}
limits: {dedup: {window: 1s}}
mcpServers:
  orders: {command: orders}
  files: {command: files}
`
	next := strings.NewReplacer(`"127.0.0.1:8080"`, `"127.0.0.1:9090"`, "window: 1s", "window: 2s",
		"command: files", "command: files2", `principal: alice`, `principal: carol`).Replace(base) +
		"  added: {command: added}\nadmin: {key_sha256: \"" + authn.HashKey("admin") + "\"}\n"
	a, b := parseConfig(t, "/etc/toolgate/toolgate.yaml", base), parseConfig(t, "/etc/toolgate/toolgate.yaml", next)
	want := []string{"admin.key_sha256", "auth.api_keys", "limits.dedup.window", "listen.http", "mcpServers.added", "mcpServers.files"}
	if got := configDiff(a, b); !slices.Equal(got, want) {
		t.Errorf("configDiff = %v, want %v", got, want)
	}
	if got, want := restartFields(a, b), []string{"limits.dedup.window", "listen.http", "mcpServers.added", "mcpServers.files"}; !slices.Equal(got, want) {
		t.Errorf("restartFields = %v, want %v", got, want)
	}
	if got := configDiff(a, parseConfig(t, "/etc/toolgate/toolgate.yaml", base)); len(got) != 0 {
		t.Errorf("the same file twice differs in %v", got)
	}
}

// ReloadKeys applies auth.api_keys and admin.key_sha256 from the file and nothing else, warns about
// the rest by name, audits the reload with principals and counts only, and keeps the last good keys
// when the file does not load.
func TestReloadKeys(t *testing.T) {
	const bobKey, adminKey = "tg_test_bob", "tg_test_admin"
	path := writeGateway(t, "", "")
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	principal := func(key string) string {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		sub, err := gw.auth.Authenticate(r)
		if err != nil {
			return ""
		}
		return sub.Principal
	}
	admin := gw.AdminHandler()
	adminStatus := func(key string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/approvals", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, r)
		return w.Code
	}
	if principal(bobKey) != "" || adminStatus(adminKey) != http.StatusUnauthorized {
		t.Fatal("bob's key or the admin key accepted before they were configured")
	}

	good := strings.Replace(string(mustRead(t, path)), "auth:\n  api_keys:\n",
		"auth:\n  api_keys:\n    - {principal: bob, sha256: \""+authn.HashKey(bobKey)+"\"}\n", 1)
	good = strings.Replace(good, `listen: {http: "127.0.0.1:0"}`, `listen: {http: "127.0.0.1:0", max_body_bytes: 2048}`, 1) +
		"admin: {listen: \"127.0.0.1:0\", key_sha256: \"" + authn.HashKey(adminKey) + "\"}\n"
	good = strings.Replace(good, "admin: {listen: \"127.0.0.1:0\"}\n", "", 1)
	write(t, path, good)
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if got := principal(bobKey); got != "bob" {
		t.Errorf("after the reload bob's key authenticates as %q", got)
	}
	if got := principal(aliceKey); got != "alice" {
		t.Errorf("after the reload alice's key authenticates as %q", got)
	}
	if got := adminStatus(adminKey); got != http.StatusOK {
		t.Errorf("the new admin key gets %d from the admin API", got)
	}
	if !strings.Contains(logs.String(), "restart to apply: listen.max_body_bytes") {
		t.Errorf("no warning naming listen.max_body_bytes")
	}
	if gw.HTTPOptions().MaxBodyBytes == 2048 {
		t.Errorf("listen.max_body_bytes applied without a restart")
	}

	// A broken file: nothing changes, the problem is logged with file, line and key.
	broken := strings.Replace(good, authn.HashKey(bobKey), "not-a-hash", 1)
	write(t, path, broken)
	if err := gw.ReloadKeys(); err == nil {
		t.Fatal("a config with a bad sha256 reloaded")
	}
	if got := principal(bobKey); got != "bob" {
		t.Errorf("after a refused reload bob's key authenticates as %q", got)
	}
	if got := adminStatus(adminKey); got != http.StatusOK {
		t.Errorf("after a refused reload the admin key gets %d", got)
	}
	if st := gw.KeyReloads(); st.Successes != 1 || st.Failures != 1 {
		t.Errorf("stats %+v, want 1 success and 1 failure", st)
	}
	if !strings.Contains(logs.String(), path+":") || !strings.Contains(logs.String(), "auth.api_keys[0].sha256: expected 64 hex characters") {
		t.Errorf("the refusal does not name the file, the key and what was expected")
	}

	// Revoking bob and removing the admin key.
	write(t, path, strings.Replace(strings.Replace(good, "    - {principal: bob, sha256: \""+authn.HashKey(bobKey)+"\"}\n", "", 1),
		", key_sha256: \""+authn.HashKey(adminKey)+"\"", "", 1))
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if principal(bobKey) != "" || adminStatus(adminKey) != http.StatusUnauthorized {
		t.Errorf("bob's key or the admin key still accepted after they were removed")
	}

	gw.Close()
	trail := string(mustRead(t, gw.cfg.AuditPath()))
	for _, want := range []string{`"kind":"keys_reload"`, `"principals_added":["bob"]`, `"admin_key":"set"`, `"decision":"rejected"`,
		`"principals_removed":["bob"]`, `"admin_key":"removed"`, `"restart_required":["listen.max_body_bytes"]`} {
		if !strings.Contains(trail, want) {
			t.Errorf("the audit trail lacks %s:\n%s", want, trail)
		}
	}
	for _, secret := range []string{bobKey, adminKey, authn.HashKey(bobKey), authn.HashKey(adminKey)} {
		if strings.Contains(logs.String(), secret) || strings.Contains(trail, secret) {
			t.Errorf("a key or a key's hash reached the log or the audit trail")
		}
	}
}

// A reloaded key whose principal only p lines name holds those lines right after the reload (the
// policy took carol for a role while no key named her), and is a role again once her key is
// removed. A key whose principal a g line makes a role refuses the file, as a start would: the
// last good keys stay.
func TestReloadKeysNewPrincipalOfPLines(t *testing.T) {
	const carolKey, agentKey = "tg_test_carol", "tg_test_agent"
	path := writeGateway(t, "", "")
	policy := filepath.Join(filepath.Dir(path), "policy.csv")
	write(t, policy, string(mustRead(t, policy))+"p, carol, echoes/echo, call, allow\np, agent, echoes/*, call, allow\ng, alice, agent\n")
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	carol := func() authz.Decision {
		return gw.policy.Decide(authz.Request{Subject: authz.Subject{Principal: "carol"}, Object: "echoes/echo", Action: authz.ActCall})
	}
	if d := carol(); d.Allowed {
		t.Fatalf("carol allowed before she has a key: %+v", d)
	}
	base := string(mustRead(t, path))
	withCarol := strings.Replace(base, "auth:\n  api_keys:\n",
		"auth:\n  api_keys:\n    - {principal: carol, sha256: \""+authn.HashKey(carolKey)+"\"}\n", 1)
	write(t, path, withCarol)
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if d := carol(); !d.Allowed {
		t.Errorf("carol denied after her key was reloaded: %+v", d)
	}
	if !gw.policy.Current().Visible(authz.Subject{Principal: "carol"}, "echoes/echo") {
		t.Error("carol does not see echoes/echo after the reload")
	}
	if strings.Contains(logs.String(), "calls are denied until a restart") {
		t.Error("the reload still warns that carol is a role")
	}

	// A key for "agent", a role of a g line: refused, carol's key and lines stay.
	write(t, path, strings.Replace(withCarol, "auth:\n  api_keys:\n",
		"auth:\n  api_keys:\n    - {principal: agent, sha256: \""+authn.HashKey(agentKey)+"\"}\n", 1))
	err = gw.ReloadKeys()
	if err == nil || !strings.Contains(err.Error(), policy+":") || !strings.Contains(err.Error(), `"agent" is a configured principal`) {
		t.Fatalf("a key for the role agent: %v", err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+agentKey)
	if _, err := gw.auth.Authenticate(r); err == nil {
		t.Error("the refused file's key for agent authenticates")
	}
	if d := carol(); !d.Allowed {
		t.Errorf("carol denied after a refused reload: %+v", d)
	}
	if st := gw.KeyReloads(); st.Successes != 1 || st.Failures != 1 {
		t.Errorf("stats %+v, want 1 success and 1 failure", st)
	}

	// carol's key removed: carol is a role of the policy again, as at a start without her key.
	write(t, path, base)
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if d := carol(); d.Allowed || !gw.policy.Current().IsRole("carol") {
		t.Errorf("carol after her key was removed: %+v", d)
	}
}

// Key reloads are counted in toolgate_config_reloads_total by result, both present from the start.
func TestReloadKeysMetrics(t *testing.T) {
	path := writeGateway(t, "", "")
	gw, err := New(context.Background(), Options{ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	scrape := func() string {
		rec := httptest.NewRecorder()
		gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	for _, want := range []string{`toolgate_config_reloads_total{result="applied"} 0`, `toolgate_config_reloads_total{result="rejected"} 0`} {
		if !strings.Contains(scrape(), want) {
			t.Errorf("metrics lack %s before any reload", want)
		}
	}
	good := string(mustRead(t, path))
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	write(t, path, strings.Replace(good, authn.HashKey(aliceKey), "not-a-hash", 1))
	if err := gw.ReloadKeys(); err == nil {
		t.Fatal("a bad sha256 reloaded")
	}
	write(t, path, good)
	if err := gw.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	body := scrape()
	for _, want := range []string{`toolgate_config_reloads_total{result="applied"} 2`, `toolgate_config_reloads_total{result="rejected"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if st := gw.KeyReloads(); st.Successes != 2 || st.Failures != 1 {
		t.Errorf("KeyReloads %+v disagrees with the metric", st)
	}
}
