package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The gateway's log lines reach stderr late, in batches (internal/logsink);
// a start that fails prints its problem straight to stderr. What was logged
// before the problem must come before it: here the policy loads (a log
// line), then the audit trail cannot be opened (the problem), and the
// process exits at once.
func TestStartupProblemComesAfterWhatWasLoggedBeforeIt(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", ""))
	missing := filepath.Join(t.TempDir(), "no-such-dir", "audit.log")
	write(t, cfg, portZero+mustRead(t, cfg)+"audit: {file: "+missing+"}\n")
	code, _, stderr := toolgateCLI(t, "serve", "--config", cfg)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	loaded, problem := strings.Index(stderr, `"policy loaded"`), strings.Index(stderr, "toolgate: ")
	if loaded < 0 || problem < 0 || loaded > problem {
		t.Fatalf("want the policy loaded line, then the problem; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr[problem:], "no-such-dir") {
		t.Errorf("the problem does not name the audit file:\n%s", stderr[problem:])
	}
}
