package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// overridesYAML reshapes two tools of the test upstream: fail (which
// reports its message argument back in its error text, so it shows what
// the upstream received) is renamed, described anew and has message fixed
// by the operator; big has bytes narrowed to 3 or 5.
const overridesYAML = `    tools:
      fail:
        override:
          name: explain_failure
          description: "Reports a failure with the operator's message."
          annotations: {destructiveHint: true}
          hide: {message: "set by the operator"}
      big:
        override:
          description_append: "Only 3 or 5 bytes."
          narrow: {bytes: {enum: [3, 5]}}
`

// Through a real mcp-go client on a gateway in front of the test upstream:
// tools/list shows the renamed tool with the operator's description and
// without the hidden parameter, and a narrowed one as allOf; a call gets
// the operator's value to the upstream; a call that sets the hidden
// parameter, or a narrowed one outside its narrowing, is invalid_arguments;
// the old name is gone.
func TestToolOverridesEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", overridesYAML))
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)

	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	if _, ok := byName["ops__fail"]; ok {
		t.Error("tools/list still shows ops__fail under its upstream name")
	}
	renamed, ok := byName["explain_failure"]
	if !ok {
		t.Fatalf("tools/list has no explain_failure: %v", toolNames(t, c))
	}
	if renamed.Description != "Reports a failure with the operator's message." {
		t.Errorf("description %q", renamed.Description)
	}
	if a := renamed.Annotations.DestructiveHint; a == nil || !*a {
		t.Errorf("annotations %+v, want destructiveHint true", renamed.Annotations)
	}
	if _, shown := renamed.InputSchema.Properties["message"]; shown {
		t.Errorf("the hidden parameter is in the schema: %+v", renamed.InputSchema)
	}
	big := byName["ops__big"]
	if !strings.HasSuffix(big.Description, "\n\nOnly 3 or 5 bytes.") {
		t.Errorf("big's description %q", big.Description)
	}
	if b, _ := json.Marshal(big.InputSchema.Properties["bytes"]); !strings.Contains(string(b), `"allOf"`) || !strings.Contains(string(b), `"enum":[3,5]`) {
		t.Errorf("big's bytes parameter %s, want the narrowing in an allOf", b)
	}

	// The upstream received the operator's message: fail reports it back.
	if _, env := callE2E(t, c, "explain_failure", `{}`); env["error_code"] != "tool_failed" || !strings.Contains(fmt.Sprint(env["message"]), "set by the operator") {
		t.Errorf("explain_failure: %v", env)
	}
	for _, tc := range []struct{ name, args, code, msg string }{
		// fail's schema has additionalProperties: false, so the client-facing schema refuses the hidden
		// parameter itself; without it, validate does (pipeline.TestOverrideInjectsFixedArguments).
		{"explain_failure", `{"message":"the model's"}`, "invalid_arguments", `"message"`},
		{"ops__fail", `{}`, "tool_not_found", "ops__fail"},
		{"ops__big", `{"bytes":4}`, "invalid_arguments", ""},
	} {
		if _, env := callE2E(t, c, tc.name, tc.args); env["error_code"] != tc.code || !strings.Contains(fmt.Sprint(env["message"]), tc.msg) {
			t.Errorf("%s %s: %v, want %s %q", tc.name, tc.args, env, tc.code, tc.msg)
		}
	}
	if _, env := callE2E(t, c, "ops__big", `{"bytes":5}`); env["ok"] != true || env["data"] != "xxxxx" {
		t.Errorf("ops__big 5: %v", env)
	}

	// toolgate tools --as shows the client-facing name, the canonical ID and that it is overridden.
	var out bytes.Buffer
	if code := tools([]string{"--config", cfg, "--as", "alice"}, &out); code != 0 {
		t.Fatalf("tools: exit %d: %s", code, out.String())
	}
	var line string
	for l := range strings.Lines(out.String()) {
		if strings.HasPrefix(l, "explain_failure ") {
			line = l
		}
	}
	if !strings.Contains(line, "ops/fail") || !strings.Contains(line, "overridden (fixed: message)") {
		t.Errorf("toolgate tools --as alice:\n%s", out.String())
	}
}

// An override that names a parameter the upstream does not have
// quarantines that tool alone; the gateway and the server's other tools
// serve on.
func TestToolOverrideQuarantinesOneTool(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", "    tools:\n      fail:\n        override: {hide: {reason: x}}\n"))
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	names := toolNames(t, c)
	if contains(names, "ops__fail") || !contains(names, "ops__echo") {
		t.Fatalf("tools/list: %v", names)
	}
	if _, env := callE2E(t, c, "ops__fail", `{}`); env["error_code"] != "tool_not_found" {
		t.Errorf("ops__fail: %v", env)
	}
}
