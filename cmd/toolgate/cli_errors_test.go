package main

import (
	"bytes"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/authn"
)

// toolgateCLI runs `toolgate args...` as a process (the test binary in its toolgate role) with
// TOOLGATE_KEY and TOOLGATE_ADMIN_KEY cleared, and returns its exit code, stdout and stderr. It is
// reaped before it returns; a process still running after a minute is killed.
func toolgateCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = append(os.Environ(), execRole+"=toolgate", "GORACE=atexit_sleep_ms=0", "TOOLGATE_KEY=", "TOOLGATE_ADMIN_KEY=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	kill.Stop()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("toolgate %v: %v", args, err)
	return 0, "", ""
}

// closedURL is a loopback address where nothing listens any more.
func closedURL(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + path
}

// The CLI tells a key the gateway refuses (exit 4, "unknown or revoked key for <url>") from a
// gateway it cannot reach (exit 3, "cannot reach the gateway at <url>"),
// and neither from a call that ran.
func TestCLIUnknownKeyVsUnreachable(t *testing.T) {
	const adminKey = "tg_test_admin_cli"
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+"admin: {key_sha256: \""+authn.HashKey(adminKey)+"\"}\n")
	url, _, gw := httpGatewayFull(t, cfg)
	adminSrv := httptest.NewServer(gw.AdminHandler())
	defer adminSrv.Close()
	admin := adminSrv.URL

	// A listener that never answers: the connection is made (the kernel's backlog) and nothing
	// comes back, so the client's --timeout ends it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentURL := "http://" + silent.Addr().String() + "/mcp"
	refused := closedURL(t, "/mcp")

	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"the key works", []string{"call", "--url", url, "--key", aliceKey, "hostile__echo", `{}`}, 0, nil},
		{"unknown key", []string{"call", "--url", url, "--key", "tg_nobody", "hostile__echo", `{}`}, exitKeyRefused,
			[]string{"unknown or revoked key for " + url, "answered 401"}},
		{"unknown key, --list", []string{"call", "--list", "--url", url, "--key", "tg_nobody"}, exitKeyRefused,
			[]string{"unknown or revoked key for " + url}},
		{"no key", []string{"call", "--url", url, "hostile__echo"}, exitKeyRefused,
			[]string{"the gateway at " + url + " wants a key", "TOOLGATE_KEY"}},
		{"connection refused", []string{"call", "--url", refused, "--key", aliceKey, "hostile__echo"}, exitUnreachable,
			[]string{"cannot reach the gateway at " + refused + ": ", "connection refused"}},
		{"no answer", []string{"call", "--url", silentURL, "--key", aliceKey, "--timeout", "500ms", "hostile__echo"}, exitUnreachable,
			[]string{"cannot reach the gateway at " + silentURL + ": ", "no answer in time"}},
		{"approvals, the key works", []string{"approvals", "list", "--url", admin, "--key", adminKey}, 0, nil},
		{"approvals, unknown key", []string{"approvals", "list", "--url", admin, "--key", "tg_nobody"}, exitKeyRefused,
			[]string{"unknown or revoked key for " + admin, "answered 401", "admin.key_sha256"}},
		{"approvals, connection refused", []string{"approvals", "list", "--url", closedURL(t, ""), "--key", adminKey}, exitUnreachable,
			[]string{"cannot reach the gateway at http://127.0.0.1:", "connection refused"}},
	} {
		code, _, stderr := toolgateCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", c.name, code, c.code, stderr)
			continue
		}
		for _, want := range c.stderr {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, want, stderr)
			}
		}
		if c.code != 0 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: want one line of stderr, got:\n%s", c.name, stderr)
		}
	}
	if exitKeyRefused == exitUnreachable || exitKeyRefused == 1 || exitKeyRefused == 2 {
		t.Fatalf("exit codes collide: key refused %d, unreachable %d", exitKeyRefused, exitUnreachable)
	}
}
