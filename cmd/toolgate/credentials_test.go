package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// credentialsConfig writes a config with the per_user upstream orders (never contacted: the command
// works on the vault alone) and extra appended.
func credentialsConfig(t *testing.T, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	write(t, path, "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth: {mode: per_user}\n"+extra)
	return path
}

func runCreds(t *testing.T, stdin string, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	code = credentialsCommand(args, strings.NewReader(stdin), &o, &e, func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) })
	return code, o.String(), e.String()
}

func newVaultKey(t *testing.T) string {
	t.Helper()
	var o bytes.Buffer
	if code := credentialsCommand([]string{"newkey"}, nil, &o, &o, time.Now); code != 0 {
		t.Fatalf("newkey: %d %s", code, o.String())
	}
	key := strings.TrimSpace(o.String())
	if _, err := vault.ParseKeys(key); err != nil {
		t.Fatalf("newkey printed %q: %v", key, err)
	}
	return key
}

// TestCredentialsCommand: set reads the secret from stdin and stores it encrypted in the file beside
// the config; list shows the entry and never the secret; revoke deletes it; the refusals say why.
func TestCredentialsCommand(t *testing.T) {
	t.Setenv(config.DefaultCredentialsKeyEnv, newVaultKey(t))
	cfg := credentialsConfig(t, "")
	if code, out, errOut := runCreds(t, "alice-secret-4242\n", "set", "orders", "alice", "--config", cfg, "--expires", "720h"); code != 0 ||
		out != "stored alice's secret for orders (17 bytes, encrypted)\n" {
		t.Fatalf("set: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCreds(t, "bob-secret", "set", "--config", cfg, "orders", "bob"); code != 0 {
		t.Fatalf("set bob: %d %s", code, errOut)
	}
	code, out, _ := runCreds(t, "", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "orders    alice      secret  operator  2026-12-01T12:00:00Z  2026-12-31T12:00:00Z") ||
		!strings.Contains(out, "orders    bob ") || strings.Contains(out, "secret-4242") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	file, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), config.DefaultCredentialsFile))
	if err != nil || strings.Contains(string(file), "alice-secret") || !strings.Contains(string(file), `"principal": "alice"`) {
		t.Fatalf("the vault file: %v\n%s", err, file)
	}
	if code, out, _ := runCreds(t, "", "revoke", "orders", "alice", "--config", cfg); code != 0 || out != "revoked alice's secret credential for orders\n" {
		t.Fatalf("revoke: %d %q", code, out)
	}
	if code, _, errOut := runCreds(t, "", "revoke", "orders", "alice", "--config", cfg); code != 1 ||
		errOut != "toolgate credentials: no credential of \"alice\" is stored for \"orders\"\n" {
		t.Fatalf("a second revoke: %d %q", code, errOut)
	}
	if code, out, _ := runCreds(t, "", "list", "--config", cfg, "--principal", "alice"); code != 0 || out != "no credentials stored\n" {
		t.Fatalf("list after revoke: %d %q", code, out)
	}
}

func TestCredentialsCommandRefusals(t *testing.T) {
	key := newVaultKey(t)
	t.Setenv(config.DefaultCredentialsKeyEnv, key)
	cfg := credentialsConfig(t, "  plain:\n    url: https://plain.example.com/mcp\n")
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"not per_user", "x", []string{"set", "plain", "alice"}, 2, `has no upstream "plain" with auth mode per_user`},
		{"unknown upstream", "x", []string{"set", "nope", "alice"}, 2, `has no upstream "nope" with auth mode per_user`},
		{"empty secret", "\n", []string{"set", "orders", "alice"}, 1, "the secret on stdin: the secret is empty"},
		{"two lines", "line1\nline2\n", []string{"set", "orders", "alice"}, 1, "control character at byte 6"},
		{"secret on the command line", "", []string{"set", "orders", "alice", "hunter2"}, 2, "usage:"},
		{"unknown kind", "", []string{"list", "--kind", "token"}, 2, `unknown kind "token": expected oauth, secret or registration`},
		{"unknown command", "", []string{"show"}, 2, "usage:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCreds(t, c.stdin, append(c.args, "--config", cfg)...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: %d %q; want %d and %q", c.args, code, errOut, c.code, c.want)
			}
			if strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "line1") {
				t.Errorf("the message echoes the secret: %q", errOut)
			}
		})
	}
	t.Setenv(config.DefaultCredentialsKeyEnv, "")
	if code, _, errOut := runCreds(t, "", "list", "--config", cfg); code != 2 ||
		!strings.Contains(errOut, "mcpServers.orders.auth.mode: mode per_user keeps each user's credential encrypted, and the key cannot be read") {
		t.Errorf("without a key: %d %q", code, errOut)
	}
}

// TestCredentialsRotation: with the new key first and the old one after it, rekey re-seals every
// credential, after which the old key can go; a credential of a key no longer held is reported.
func TestCredentialsRotation(t *testing.T) {
	oldKey, newKey := newVaultKey(t), newVaultKey(t)
	t.Setenv(config.DefaultCredentialsKeyEnv, oldKey)
	cfg := credentialsConfig(t, "")
	for _, p := range []string{"alice", "bob"} {
		if code, _, errOut := runCreds(t, p+"-secret", "set", "orders", p, "--config", cfg); code != 0 {
			t.Fatalf("set %s: %s", p, errOut)
		}
	}
	t.Setenv(config.DefaultCredentialsKeyEnv, newKey+","+oldKey)
	if code, out, errOut := runCreds(t, "", "rekey", "--config", cfg); code != 0 ||
		!strings.HasPrefix(out, "re-sealed 2 credentials with the first key; 0 already were") {
		t.Fatalf("rekey: %d %q %q", code, out, errOut)
	}
	t.Setenv(config.DefaultCredentialsKeyEnv, newKey)
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, closeStore, err := openCredentialStore(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if got, _, err := v.Get(context.Background(), vault.Key{Principal: "bob", Upstream: "orders", Kind: vault.Secret}); err != nil || string(got) != "bob-secret" {
		t.Fatalf("bob's secret with the new key alone: %q, %v", got, err)
	}
	t.Setenv(config.DefaultCredentialsKeyEnv, newVaultKey(t)) // a key that sealed nothing
	if code, _, errOut := runCreds(t, "", "rekey", "--config", cfg); code != 1 ||
		!strings.Contains(errOut, "2 credentials were sealed with a key that is not configured, and were left as they are") {
		t.Fatalf("rekey with a lost key: %d %q", code, errOut)
	}
}

// TestCredentialsCommandOnRedis: with state.redis the command works on the vault in Redis, which
// every replica reads.
func TestCredentialsCommandOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv(config.DefaultCredentialsKeyEnv, newVaultKey(t))
	cfg := credentialsConfig(t, fmt.Sprintf("state: {redis: {url: %q, key_prefix: \"tgc:\"}}\n", srv.URL()))
	if code, _, errOut := runCreds(t, "alice-secret", "set", "orders", "alice", "--config", cfg); code != 0 {
		t.Fatalf("set: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), config.DefaultCredentialsFile)); !os.IsNotExist(err) {
		t.Error("with state.redis a credentials file was written")
	}
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool { return rdb.HLen(context.Background(), "tgc:cred:records").Val() == 1 })
	if code, out, _ := runCreds(t, "", "list", "--config", cfg); code != 0 || !strings.Contains(out, "alice") {
		t.Fatalf("list: %d %q", code, out)
	}
}
