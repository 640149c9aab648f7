package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/internal/testupstream"
	"github.com/toolgate/toolgate/upstreams"
)

// A rug pull through the whole gateway: tofu pins the tool on first sight;
// a reordered schema changes nothing; a changed description, schema or
// annotation blocks the tool (hidden, tool_changed) until `toolgate pins
// approve`, which the running gateway picks up from the lock file.
func TestRugPullBlockedUntilApproved(t *testing.T) {
	// One upstream process state for the gateway and the CLI: over HTTP.
	upURL, stop, err := testupstream.StartHTTP(testupstream.Options{Name: "rug"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := writeConfig(t, fmt.Sprintf("  rug:\n    url: %q\n    egress: {allow: [loopback]}\n", upURL))
	url, _, gw := httpGatewayFull(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw.Watch(ctx)
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "toolgate.pins.json")); err != nil {
		t.Fatalf("tofu did not record the pins: %v", err)
	}
	c := connectHTTP(t, url, aliceKey)
	pull := func(variant string) {
		t.Helper()
		if _, env := callE2E(t, c, "rug__rug_pull", fmt.Sprintf(`{"variant":%q}`, variant)); env["ok"] != true {
			t.Fatalf("rug_pull %s: %v", variant, env)
		}
	}
	blocked := func(cat *upstreams.Catalog) bool { return len(cat.Changed()) == 1 }

	for _, variant := range []string{"description", "schema", "annotations"} {
		t.Run(variant, func(t *testing.T) {
			pull(variant)
			waitCatalog(t, gw.Upstreams(), "target blocked", blocked)
			if _, env := callE2E(t, c, "rug__target", `{"id":1}`); env["error_code"] != "tool_changed" {
				t.Fatalf("changed tool called: %v", env)
			}
			if contains(toolNames(t, c), "rug__target") {
				t.Fatal("a changed tool is listed")
			}
			var out bytes.Buffer
			if code := pinsCommand([]string{"diff", "--config", cfg}, &out); code != 1 || !strings.Contains(out.String(), "rug/target") {
				t.Fatalf("pins diff exit %d:\n%s", code, out.String())
			}
			out.Reset()
			if code := pinsCommand([]string{"approve", "--config", cfg, "rug__target"}, &out); code != 0 {
				t.Fatalf("pins approve exit %d:\n%s", code, out.String())
			}
			waitCatalog(t, gw.Upstreams(), "target released", callable("rug__target"))
			if _, env := callE2E(t, c, "rug__target", `{"id":1}`); env["ok"] != true {
				t.Fatalf("approved tool: %v", env)
			}
		})
	}
	// The trail holds each block and each refused call.
	var pinChanges, refused int
	for _, r := range auditRecords(t, gw.Config().AuditPath()) {
		switch {
		case r.Kind == audit.KindPinChange && r.Tool == "rug/target" && r.Decision == audit.DecisionDenied:
			pinChanges++
		case r.Kind == audit.KindCall && r.ErrorCode == "tool_changed" && r.Tool == "rug/target":
			refused++
		}
	}
	if pinChanges != 3 || refused != 3 {
		t.Errorf("audit: %d pin_change and %d tool_changed records, want 3 and 3", pinChanges, refused)
	}
}

// The reordered definition hashes the same as the original: pinning it is
// not a change.
func TestReorderedSchemaIsNotAChange(t *testing.T) {
	upURL, stop, err := testupstream.StartHTTP(testupstream.Options{Name: "rug"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := writeConfig(t, fmt.Sprintf("  rug:\n    url: %q\n    egress: {allow: [loopback]}\n", upURL))
	url, _, gw := httpGatewayFull(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	callE2E(t, c, "rug__rug_pull", `{"variant":"reorder"}`)
	// Wait until the catalog holds the reordered bytes as a callable tool;
	// a blocked tool would be a stand-in without a schema, so this waits in
	// vain (and fails) if the reorder counted as a change.
	waitCatalog(t, gw.Upstreams(), "the reordered schema, callable", func(cat *upstreams.Catalog) bool {
		tool, ok := cat.Resolve("rug__target")
		return ok && !tool.Changed && strings.HasPrefix(string(tool.InputSchema), `{"additionalProperties"`) // key order as the upstream sent it
	})
	if _, env := callE2E(t, c, "rug__target", `{"id":1}`); env["ok"] != true {
		t.Fatalf("target after reorder: %v", env)
	}
}
