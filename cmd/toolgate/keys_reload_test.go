package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authn"
)

// The end-to-end tests of reloading auth.api_keys and admin.key_sha256 (issue 16, item 11): a real
// `toolgate serve` process, real mcp-go clients, the config file edited under it.

const (
	carolKey = "tg_test_carol"
	daveKey  = "tg_test_dave"
	erinKey  = "tg_test_erin"

	msgKeysReloaded = "API keys reloaded"
	msgKeysRefused  = "config reload refused; the last good API keys and admin key stay in force"
	msgWatching     = "watching the config file for changes to auth.api_keys and admin.key_sha256"
)

// keyLine is a config line for one API key, as writeConfig writes them.
func keyLine(principal, key string) string {
	return "    - {principal: " + principal + ", sha256: \"" + authn.HashKey(key) + "\"}\n"
}

// reloadConfig writes a config for the hostile upstream with listeners on port 0 (and admin, when
// not "", as the admin key), and gives carol and dave the caller role in the policy (only alice and
// bob have keys); erin has a p line of her own and no g line, so the policy takes her for a role
// until a key names her.
func reloadConfig(t *testing.T, admin string) string {
	t.Helper()
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	listeners := portZero
	if admin != "" {
		listeners = "listen: {http: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\", key_sha256: \"" + authn.HashKey(admin) + "\"}\n"
	}
	write(t, cfg, listeners+mustRead(t, cfg))
	policy := filepath.Join(filepath.Dir(cfg), "policy.csv")
	write(t, policy, mustRead(t, policy)+"g, carol, caller\ng, dave, caller\np, erin, hostile/echo, call, allow\n")
	return cfg
}

// reloadGateway starts `toolgate serve` on reloadConfig and waits until it watches its config file.
func reloadGateway(t *testing.T, admin string) (cfg string, p *gatewayProcess) {
	t.Helper()
	cfg = reloadConfig(t, admin)
	p = serveProcess(t, cfg)
	waitLog(t, p, msgWatching, 1) // an edit before the watch is in place would go unseen
	return cfg, p
}

// waitLog waits until the gateway has logged msg n times and returns those records. It reads the
// log as the process writes it; it fails the test if the gateway exits or 30s pass.
func waitLog(t *testing.T, p *gatewayProcess, msg string, n int) []map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if recs := p.stderr.Records(msg); len(recs) >= n {
			return recs
		}
		select {
		case <-p.done:
			t.Fatalf("the gateway exited (%v) before logging %q %d times", p.err, msg, n)
		case <-deadline:
			t.Fatalf("the gateway did not log %q %d times in 30s", msg, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitCallLine waits until the gateway has logged the tools/call line of
// principal's call of tool: lines reach stderr a few ms after the answer
// (internal/logsink), so a scan of the log for what must not be there
// waits for the last call's line first.
func waitCallLine(t *testing.T, p *gatewayProcess, principal, tool string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for _, rec := range p.stderr.Records("tools/call") {
			if rec["principal"] == principal && rec["tool"] == tool {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the gateway exited (%v) before logging %s's call of %s", p.err, principal, tool)
		case <-deadline:
			t.Fatalf("the gateway did not log %s's call of %s in 30s", principal, tool)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// loggedURL is the "url" of the gateway's first log record msg.
func loggedURL(t *testing.T, p *gatewayProcess, msg string) string {
	t.Helper()
	u, _ := waitLog(t, p, msg, 1)[0]["url"].(string)
	if u == "" {
		t.Fatalf("%q logged no url", msg)
	}
	return u
}

// initializeErr is what a real mcp-go client gets from initialize with key.
func initializeErr(url, key string) error {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		return err
	}
	c := client.NewClient(tr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	_, err = c.Initialize(ctx, req)
	return err
}

// wantRefused fails unless err is the 401 of an unknown key.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, transport.ErrAuthorizationRequired) {
		t.Fatalf("%s: %v, want a 401 (transport.ErrAuthorizationRequired)", what, err)
	}
}

// principals is a reload record's list attribute.
func principals(rec map[string]any, key string) string {
	b, _ := json.Marshal(rec[key])
	return string(b)
}

// A key that is not in the config is refused; once it is added to the file, the gateway takes it
// without a restart, when the file changes and on SIGHUP. A new principal that only p lines name
// (erin) holds them from the reload on, as she would after a restart.
func TestNewAPIKeyWithoutRestart(t *testing.T) {
	t.Run("file change", func(t *testing.T) {
		cfg, p := reloadGateway(t, "")
		url := loggedURL(t, p, "serving Streamable HTTP")
		wantRefused(t, "dave before his key is configured", initializeErr(url, daveKey))

		write(t, cfg, strings.Replace(mustRead(t, cfg), keyLine("bob", bobKey), keyLine("bob", bobKey)+keyLine("dave", daveKey)+keyLine("erin", erinKey), 1))
		rec := waitLog(t, p, msgKeysReloaded, 1)[0]
		if got := principals(rec, "principals_added"); got != `["dave","erin"]` || rec["keys_before"] != 2.0 || rec["keys_after"] != 4.0 {
			t.Fatalf("reload record %v, want dave and erin added, 2 keys before and 4 after", rec)
		}
		dave := connectHTTP(t, url, daveKey)
		if _, env := callE2E(t, dave, "hostile__echo", `{"who":"dave"}`); env["ok"] != true {
			t.Fatalf("dave's call after the reload: %v", env)
		}
		erin := connectHTTP(t, url, erinKey)
		if _, env := callE2E(t, erin, "hostile__echo", `{"who":"erin"}`); env["ok"] != true {
			t.Fatalf("erin's call (her own p line) after the reload: %v", env)
		}
		if _, env := callE2E(t, erin, "hostile__sleep", `{"ms":1}`); env["error_code"] != "tool_not_found" && env["error_code"] != "tool_not_allowed" {
			t.Fatalf("erin's call of a tool her line does not grant: %v", env)
		}
		waitCallLine(t, p, "erin", "hostile__sleep") // the last call's line: every line before it is out too
		for _, secret := range []string{daveKey, authn.HashKey(daveKey), erinKey, authn.HashKey(erinKey)} {
			if strings.Contains(p.stderr.String(), secret) {
				t.Fatal("the gateway logged a key or a key's hash")
			}
		}
	})

	// The config file is a symlink into another directory, which the watcher does not watch, so
	// only the SIGHUP can make this reload.
	t.Run("SIGHUP", func(t *testing.T) {
		cfg := reloadConfig(t, "")
		real := filepath.Join(t.TempDir(), "real.yaml")
		write(t, real, mustRead(t, cfg))
		if err := os.Remove(cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, cfg); err != nil {
			t.Fatal(err)
		}
		p := serveProcess(t, cfg)
		waitLog(t, p, msgWatching, 1)
		url := loggedURL(t, p, "serving Streamable HTTP")
		wantRefused(t, "dave before his key is configured", initializeErr(url, daveKey))

		write(t, real, strings.Replace(mustRead(t, real), keyLine("bob", bobKey), keyLine("bob", bobKey)+keyLine("dave", daveKey), 1))
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if rec := waitLog(t, p, msgKeysReloaded, 1)[0]; principals(rec, "principals_added") != `["dave"]` {
			t.Fatalf("reload record %v, want dave added", rec)
		}
		log := p.stderr.String()
		if hup := strings.Index(log, "SIGHUP: reloading"); hup < 0 || hup > strings.Index(log, msgKeysReloaded) {
			t.Fatal("the keys were reloaded before the SIGHUP: the test cannot tell SIGHUP worked")
		}
		dave := connectHTTP(t, url, daveKey)
		if _, env := callE2E(t, dave, "hostile__echo", `{"who":"dave"}`); env["ok"] != true {
			t.Fatalf("dave's call after SIGHUP: %v", env)
		}
	})
}

// A key removed from the file stops working at the next request: its open session gets 401, a new
// session cannot be opened, and the CLI says the key is unknown or revoked (exit 4). A call already
// running when the key is revoked completes, and other keys are unaffected.
func TestRevokedAPIKeyStopsWorking(t *testing.T) {
	cfg, p := reloadGateway(t, "")
	url := loggedURL(t, p, "serving Streamable HTTP")
	alice := connectHTTP(t, url, aliceKey)
	bob := connectHTTP(t, url, bobKey)
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("alice before the revocation: %v", env)
	}

	// A call in flight across the revocation: the upstream's progress notification says it arrived.
	arrived := make(chan struct{}, 1)
	alice.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	})
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "hostile__sleep"
		req.Params.Arguments = map[string]any{"ms": 3000}
		req.Params.Meta = &mcp.Meta{ProgressToken: "in-flight"}
		res, err := alice.CallTool(context.Background(), req)
		done <- result{res, err}
	}()
	select {
	case <-arrived:
	case r := <-done:
		t.Fatalf("the sleep ended before it was in flight: %v %v", r.res, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the sleep never reached the upstream")
	}

	write(t, cfg, strings.Replace(mustRead(t, cfg), keyLine("alice", aliceKey), "", 1))
	rec := waitLog(t, p, msgKeysReloaded, 1)[0]
	if got := principals(rec, "principals_removed"); got != `["alice"]` {
		t.Fatalf("reload record %v, want alice removed", rec)
	}
	select {
	case r := <-done:
		// The 3s sleep is a margin, not a synchronisation: the reload takes the watcher's 250ms.
		t.Fatalf("the call ended (%v %v) before the revocation was applied; the test proves nothing on a machine this slow", r.res, r.err)
	default:
	}

	// The next request of alice's open session, and a new session, are refused.
	_, err := alice.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "hostile__echo", Arguments: map[string]any{}}})
	wantRefused(t, "alice's open session after the revocation", err)
	wantRefused(t, "a new session with alice's revoked key", initializeErr(url, aliceKey))
	if code, _, stderr := toolgateCLI(t, "call", "--url", url, "--key", aliceKey, "hostile__echo"); code != exitKeyRefused ||
		!strings.Contains(stderr, "unknown or revoked key for "+url) {
		t.Errorf("toolgate call with the revoked key: exit %d, stderr %q", code, stderr)
	}
	if _, env := callE2E(t, bob, "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("bob after alice's revocation: %v", env)
	}

	r := <-done
	if r.err != nil || r.res.IsError {
		t.Fatalf("the call in flight when alice's key was revoked: %v %+v", r.err, r.res)
	}
}

// A config that does not load (on a file change or on SIGHUP) changes nothing: the keys in force
// keep working, the problem is logged with the file, the key and what was expected, and a good file
// afterwards is applied.
func TestBadConfigReloadKeepsKeys(t *testing.T) {
	cfg, p := reloadGateway(t, "")
	url := loggedURL(t, p, "serving Streamable HTTP")
	alice := connectHTTP(t, url, aliceKey)
	good := mustRead(t, cfg)

	// dave's line holds the key itself instead of its hash: the whole file is refused.
	write(t, cfg, strings.Replace(good, keyLine("bob", bobKey),
		keyLine("bob", bobKey)+"    - {principal: dave, sha256: \""+daveKey+"\"}\n", 1))
	rec := waitLog(t, p, msgKeysRefused, 1)[0]
	problems := principals(rec, "problems")
	for _, want := range []string{cfg + ":", "auth.api_keys[2].sha256", "expected 64 hex characters"} {
		if !strings.Contains(problems, want) {
			t.Errorf("the refusal's problems %s lack %q", problems, want)
		}
	}
	if strings.Contains(p.stderr.String(), daveKey) {
		t.Error("the refusal echoed the value, a key pasted in place of its hash")
	}
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("alice's open session after the refused reload: %v", env)
	}
	if _, env := callE2E(t, connectHTTP(t, url, bobKey), "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("a new session for bob after the refused reload: %v", env)
	}
	wantRefused(t, "dave, whose line was refused", initializeErr(url, daveKey))

	// SIGHUP reads the same broken file: refused again.
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, msgKeysRefused, 2)
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("alice after the second refusal: %v", env)
	}

	// Fixed: applied.
	write(t, cfg, strings.Replace(good, keyLine("bob", bobKey), keyLine("bob", bobKey)+keyLine("dave", daveKey), 1))
	waitLog(t, p, msgKeysReloaded, 1)
	if _, env := callE2E(t, connectHTTP(t, url, daveKey), "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("dave after the fixed file: %v", env)
	}
}

// The admin key is reloaded too: after the file names a new admin key, `toolgate approvals` works
// with it, and the old key gets the "unknown or revoked key" exit code. A changed setting that needs
// a restart is named in one warning and not applied.
func TestAdminKeyReload(t *testing.T) {
	const oldAdmin, newAdmin = "tg_test_admin_old", "tg_test_admin_new"
	cfg, p := reloadGateway(t, oldAdmin)
	admin := loggedURL(t, p, "serving the admin API")
	url := loggedURL(t, p, "serving Streamable HTTP")
	if code, _, stderr := toolgateCLI(t, "approvals", "list", "--url", admin, "--key", oldAdmin); code != 0 {
		t.Fatalf("approvals list with the admin key: exit %d: %s", code, stderr)
	}
	if code, _, _ := toolgateCLI(t, "approvals", "list", "--url", admin, "--key", newAdmin); code != exitKeyRefused {
		t.Fatalf("approvals list with a key not yet configured: exit %d, want %d", code, exitKeyRefused)
	}

	next := strings.Replace(mustRead(t, cfg), authn.HashKey(oldAdmin), authn.HashKey(newAdmin), 1)
	next = strings.Replace(next, "limits:\n  dedup: {window: 0s}\n", "limits:\n  dedup: {window: 0s}\n  timeout: 7s\n", 1)
	write(t, cfg, next)
	rec := waitLog(t, p, msgKeysReloaded, 1)[0]
	if rec["admin_key"] != "changed" {
		t.Fatalf("reload record %v, want admin_key changed", rec)
	}
	if warn := p.stderr.Records("restart to apply: limits.timeout"); len(warn) != 1 {
		t.Errorf("want one warning naming limits.timeout; log:\n%s", p.stderr)
	}
	if code, _, stderr := toolgateCLI(t, "approvals", "list", "--url", admin, "--key", newAdmin); code != 0 {
		t.Errorf("approvals list with the new admin key: exit %d: %s", code, stderr)
	}
	code, _, stderr := toolgateCLI(t, "approvals", "list", "--url", admin, "--key", oldAdmin)
	if code != exitKeyRefused || !strings.Contains(stderr, "unknown or revoked key for "+admin) {
		t.Errorf("approvals list with the old admin key: exit %d, stderr %q; want %d, unknown or revoked key", code, stderr, exitKeyRefused)
	}
	// The API keys did not change, and still work.
	alice := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("alice after the admin key reload: %v", env)
	}
	// A refused call's line is at info (a successful one is at debug, the
	// audit trail holding it): the last line to wait for.
	if _, env := callE2E(t, alice, "hostile__nope", `{}`); env["error_code"] != "tool_not_found" {
		t.Errorf("alice's call of no tool: %v", env)
	}
	waitCallLine(t, p, "alice", "hostile__nope")
	for _, secret := range []string{oldAdmin, newAdmin, authn.HashKey(oldAdmin), authn.HashKey(newAdmin)} {
		if strings.Contains(p.stderr.String(), secret) {
			t.Error("the gateway logged an admin key or its hash")
		}
	}
}
