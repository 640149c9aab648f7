package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// TestImportClaudeDesktopConfigThenServe imports a Claude Desktop file whose one server is the test
// upstream (with a credential in its env and the app's preferences beside mcpServers), checks what was
// written, runs `toolgate check` on it, then starts `toolgate serve --stdio` on the written config with
// a real mcp-go client: the upstream's tools are listed and called, and the credential reaches the
// upstream through the environment, never through a file.
func TestImportClaudeDesktopConfigThenServe(t *testing.T) {
	const secret = "sk-test-0123456789abcdefSECRET"
	dir := t.TempDir()
	clientFile := filepath.Join(dir, "claude_desktop_config.json")
	desktop := map[string]any{
		"mcpServers": map[string]any{
			"test.upstream": map[string]any{ // not a toolgate name: imported as test-upstream
				"command": self(t),
				"args":    []string{"-name", "upstream"},
				"env": map[string]string{
					execRole:           "upstream",
					"GORACE":           "atexit_sleep_ms=0",
					"UPSTREAM_API_KEY": secret,
				},
			},
		},
		"preferences": map[string]any{"menuBarEnabled": false},
	}
	data, err := json.MarshalIndent(desktop, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	write(t, clientFile, string(data))

	// Pasted as it is, the file is refused with the way out.
	var checkOut bytes.Buffer
	if code := check(clientFile, true, &checkOut); code != 1 || !strings.Contains(checkOut.String(), "run `toolgate import "+clientFile+"`") {
		t.Errorf("check on the client file: exit %d, want 1 and the import hint:\n%s", code, checkOut.String())
	}

	out := filepath.Join(dir, "gateway")
	var stdout, stderr bytes.Buffer
	if code := importCommand([]string{clientFile, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("import: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	cfgPath := filepath.Join(out, "toolgate.yaml")
	printed := stdout.String()
	for _, want := range []string{
		"Imported 1 server(s) from " + clientFile + " (Claude Desktop):",
		"warning: mcpServers.test-upstream: renamed from \"test.upstream\"",
		"export UPSTREAM_API_KEY=...",
		`"--config",` + "\n        " + `"` + cfgPath + `"`,
		`"UPSTREAM_API_KEY": "<UPSTREAM_API_KEY>"`,
		"toolgate check --config " + cfgPath,
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the output lacks %q:\n%s", want, printed)
		}
	}
	if strings.Contains(printed, secret) {
		t.Errorf("the output prints the secret:\n%s", printed)
	}
	for _, name := range []string{"toolgate.yaml", "policy.csv", "model.conf"} {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", name, fi.Mode().Perm())
		}
		if strings.Contains(mustRead(t, filepath.Join(out, name)), secret) {
			t.Errorf("%s holds the secret", name)
		}
	}
	if got := mustRead(t, filepath.Join(out, "model.conf")); got != mustRead(t, "../../model.conf") {
		t.Error("model.conf is not the repository's model")
	}

	// A second import into the same directory refuses to overwrite; --force does.
	stdout.Reset()
	stderr.Reset()
	if code := importCommand([]string{"--out", out, clientFile}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), cfgPath+" exists; pass --force to overwrite it") {
		t.Errorf("import over existing files: exit %d, stderr %q", code, stderr.String())
	}
	if code := importCommand([]string{"--force", "--out", out, clientFile}, &stdout, &stderr); code != 0 {
		t.Errorf("import --force: exit %d, stderr %q", code, stderr.String())
	}

	// toolgate check, with the variable set as the output says, starts the upstream and lists its tools.
	t.Setenv("UPSTREAM_API_KEY", secret)
	checkOut.Reset()
	if code := check(cfgPath, false, &checkOut); code != 0 {
		t.Fatalf("check on the imported config: exit %d\n%s", code, checkOut.String())
	}

	tr := transport.NewStdio(self(t), []string{execRole + "=toolgate", "GORACE=atexit_sleep_ms=0", "UPSTREAM_API_KEY=" + secret},
		"serve", "--stdio", "--config", cfgPath)
	c := initClient(t, client.NewClient(tr))
	names := toolNames(t, c)
	for _, want := range []string{"test-upstream__echo", "test-upstream__env"} {
		if !contains(names, want) {
			t.Fatalf("tools/list = %v, want %s among them", names, want)
		}
	}
	if _, env := callE2E(t, c, "test-upstream__echo", `{"imported":true}`); env["ok"] != true {
		t.Fatalf("echo through the imported config: %v", env)
	}
	_, env := callE2E(t, c, "test-upstream__env", `{}`)
	data2, _ := env["data"].(map[string]any)
	if env["ok"] != true || data2["UPSTREAM_API_KEY"] != secret {
		t.Errorf("the upstream did not get its credential from toolgate's environment: ok=%v UPSTREAM_API_KEY=%v", env["ok"], data2["UPSTREAM_API_KEY"])
	}
}

func TestImportUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{nil, {"a.json", "b.json"}, {"--nope", "a.json"}} {
		stderr.Reset()
		if code := importCommand(args, &stdout, &stderr); code != 2 {
			t.Errorf("import %q: exit %d, want 2", args, code)
		}
	}
	stderr.Reset()
	if code := importCommand([]string{filepath.Join(t.TempDir(), "missing.json")}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no such file or directory") {
		t.Errorf("a missing file: exit %d, stderr %q", code, stderr.String())
	}
}

// TestImportRefusedByToolgate: a server the client accepts and toolgate does not stops the import
// before anything is written, naming the problem.
func TestImportRefusedByToolgate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.json")
	write(t, file, `{"mcpServers": {"ws": {"url": "ws://127.0.0.1:9000/mcp"}}}`)
	var stdout, stderr bytes.Buffer
	if code := importCommand([]string{"--out", filepath.Join(dir, "out"), file}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "toolgate would refuse the config imported from "+file) || !strings.Contains(stderr.String(), "mcpServers.ws.url") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("the import wrote something: %v", err)
	}
}

// TestImportModelIsTheRepositoryModel keeps the model import writes equal to the repository's.
func TestImportModelIsTheRepositoryModel(t *testing.T) {
	if string(importModel) != mustRead(t, "../../model.conf") {
		t.Error("cmd/toolgate/import_model.conf differs from model.conf: copy model.conf over it")
	}
}
