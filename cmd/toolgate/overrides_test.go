package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/discovery"
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
// the operator's value to the upstream, even when the model sends its own;
// a narrowed parameter outside its narrowing is invalid_arguments; the old
// name is gone.
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
	// A model that sends the hidden parameter anyway (fail's schema has additionalProperties: false)
	// does not get its value through: the upstream receives the operator's.
	if _, env := callE2E(t, c, "explain_failure", `{"message":"the model's"}`); env["error_code"] != "tool_failed" ||
		!strings.Contains(fmt.Sprint(env["message"]), "set by the operator") || strings.Contains(fmt.Sprint(env["message"]), "the model's") {
		t.Errorf("explain_failure with the model's message: %v", env)
	}
	for _, tc := range []struct{ name, args, code, msg string }{
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

// nestedOverridesYAML reshapes deploy (an echo whose parameters nest in
// objects, one through a $ref) at depth: options.dry_run and target.region
// are fixed, options.level is narrowed, and the tool is renamed ship.
const nestedOverridesYAML = `    tools:
      deploy:
        override:
          name: ship
          description: "Ships a build. Dry runs only."
          hide: {options.dry_run: true, target.region: eu}
          narrow: {options.level: {enum: [low, mid]}}
`

// nestedPolicy allows ship only with the operator's values, which the
// client never sends, and never for prod: if conditions saw the
// arguments as sent, every call would be denied.
const nestedPolicy = `p, caller, ops/echo, call, allow
p, caller, ops/deploy, call, allow, options.dry_run == true && target.region == 'eu'
p, caller, ops/deploy, call, deny, name == 'prod'
g, alice, caller
`

// Through a real mcp-go client on a gateway in front of the test upstream,
// overrides of nested parameters: tools/list shows ship without the hidden
// nested parameters and with the narrowed one; the upstream (which echoes
// what it receives) gets the operator's values at their depth, whatever
// the model sends there; policy conditions on the nested fixed values
// allow the call; toolgate tools --as --json shows the same view.
func TestNestedToolOverridesEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", nestedOverridesYAML, "-nested"))
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), nestedPolicy)
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)

	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ship *mcp.Tool
	for i := range res.Tools {
		if res.Tools[i].Name == "ship" {
			ship = &res.Tools[i]
		}
		if res.Tools[i].Name == "ops__deploy" {
			t.Error("tools/list still shows ops__deploy")
		}
	}
	if ship == nil {
		t.Fatalf("tools/list has no ship: %v", toolNames(t, c))
	}
	listed, _ := json.Marshal(ship.InputSchema)
	assertNestedView(t, "tools/list", ship.Description, listed)

	for _, tc := range []struct{ args, want string }{
		{`{"name":"web"}`, `{"name":"web","options":{"dry_run":true},"target":{"region":"eu"}}`},
		{`{"name":"web","options":{"dry_run":false,"level":"low"},"target":{"region":"us","zone":"b"}}`,
			`{"name":"web","options":{"dry_run":true,"level":"low"},"target":{"region":"eu","zone":"b"}}`},
	} {
		if _, env := callE2E(t, c, "ship", tc.args); env["ok"] != true || !sameJSON(t, env["data"], tc.want) {
			t.Errorf("ship %s: %v\nwant the upstream to get %s", tc.args, env, tc.want)
		}
	}
	for _, tc := range []struct{ name, args, code string }{
		{"ship", `{"name":"web","options":{"level":"high"}}`, "invalid_arguments"}, // outside the narrowing
		{"ship", `{"name":"prod","options":{"level":"mid"}}`, "tool_not_allowed"},  // the deny line's condition
		{"ship", `{"name":"web","options":"fast"}`, "invalid_arguments"},
		{"ops__deploy", `{"name":"web"}`, "tool_not_found"},
	} {
		if _, env := callE2E(t, c, tc.name, tc.args); env["error_code"] != tc.code {
			t.Errorf("%s %s: %v, want %s", tc.name, tc.args, env, tc.code)
		}
	}

	var out bytes.Buffer
	if code := tools([]string{"--config", cfg, "--as", "alice", "--json"}, &out); code != 0 {
		t.Fatalf("tools --json: exit %d: %s", code, out.String())
	}
	var shown []struct {
		Name, ID, Description string
		InputSchema           json.RawMessage
		Fixed                 []string
	}
	if err := json.Unmarshal(out.Bytes(), &shown); err != nil {
		t.Fatalf("tools --json: %v\n%s", err, out.String())
	}
	var found bool
	for _, s := range shown {
		if s.Name == "ship" {
			found = true
			if s.ID != "ops/deploy" || strings.Join(s.Fixed, ",") != "options.dry_run,target.region" {
				t.Errorf("tools --json: ship %+v", s)
			}
			assertNestedView(t, "toolgate tools --json", s.Description, s.InputSchema)
		}
	}
	if !found {
		t.Errorf("toolgate tools --as alice --json has no ship:\n%s", out.String())
	}

	// toolgate policy test decides the conditions on the final arguments too, as the gateway does.
	cases := filepath.Join(filepath.Dir(cfg), "cases.yaml")
	write(t, cases, `cases:
  - {name: fixed values, principal: alice, tool: ship, args: {name: web, options: {dry_run: false}}, expect: allow}
  - {name: prod, principal: alice, tool: ship, args: {name: prod}, expect: deny}
  - {name: old name, principal: alice, tool: ops__deploy, args: {name: web}, expect: allow}
`)
	code, report, errOut := runPolicyCmd("test", "--config", cfg, cases)
	if code != 1 || !strings.Contains(report, "3 case(s): 2 passed, 1 failed") ||
		!strings.Contains(report, `"ops__deploy" is renamed "ship" (mcpServers.ops.tools.deploy.override.name): a call by its old name answers tool_not_found`) {
		t.Errorf("toolgate policy test: exit %d\n%s%s", code, report, errOut)
	}
}

// assertNestedView checks what a client is shown of ship: the operator's
// description, no hidden nested parameter, the narrowing of options.level.
func assertNestedView(t *testing.T, where, description string, schema json.RawMessage) {
	t.Helper()
	if description != "Ships a build. Dry runs only." {
		t.Errorf("%s: description %q", where, description)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	s := compact.String()
	for _, hidden := range []string{"dry_run", "region"} {
		if strings.Contains(s, hidden) {
			t.Errorf("%s: the schema shows the hidden %s: %s", where, hidden, s)
		}
	}
	if !strings.Contains(s, `{"allOf":[{"enum":["low","mid","high"],"type":"string"},{"enum":["low","mid"]}]}`) || !strings.Contains(s, `"zone"`) {
		t.Errorf("%s: schema %s", where, s)
	}
}

// sameJSON reports whether got (a decoded JSON value) is the JSON text want.
func sameJSON(t *testing.T, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(w)
	return string(a) == string(b)
}

// A rename onto another tool's client-facing name quarantines both, and
// an override of a tool the upstream does not list is a warning; toolgate
// tools and the gateway's log say so, and the other tools serve on.
func TestToolOverrideNameProblemsAreReported(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", `    tools:
      fail: {override: {name: ops__echo}}
      retired: {override: {name: old_tool}}
`))
	url, logs := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	names := toolNames(t, c)
	if contains(names, "ops__echo") || contains(names, "ops__fail") || !contains(names, "ops__sleep") {
		t.Errorf("tools/list: %v", names)
	}
	if _, env := callE2E(t, c, "old_tool", `{}`); env["error_code"] != "tool_not_found" {
		t.Errorf("old_tool: %v", env)
	}
	for _, want := range []string{`client-facing name \"ops__echo\" is claimed by`,
		`mcpServers.ops.tools.retired.override: server ops lists no tool \"retired\", so the override applies to nothing and \"old_tool\" answers tool_not_found`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the gateway's log has no %s:\n%s", want, logs.String())
		}
	}
	var out bytes.Buffer
	if code := tools([]string{"--config", cfg, "--as", "alice"}, &out); code != 0 {
		t.Fatalf("tools: exit %d: %s", code, out.String())
	}
	for _, want := range []string{`(tool ops/fail is quarantined, not listed: client-facing name "ops__echo" is claimed by`,
		`(warning: mcpServers.ops.tools.retired.override: server ops lists no tool "retired"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("toolgate tools has no %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	check(cfg, false, &out)
	for _, want := range []string{`mcpServers.ops: tool "fail" quarantined (not listed, not callable): client-facing name "ops__echo" is claimed by`,
		`warning: mcpServers.ops.tools.retired.override: server ops lists no tool "retired"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("toolgate check has no %q:\n%s", want, out.String())
		}
	}
}

// A discovery client finds an overridden tool by its new name and
// description, is shown its client-facing schema, and an inner call through
// the call meta-tool gets the operator's nested values to the upstream and
// answers exactly as a direct call does; the old name is not found either
// way.
func TestDiscoveryOfOverriddenTools(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", nestedOverridesYAML, "-nested"))
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), nestedPolicy)
	write(t, cfg, mustRead(t, cfg)+"toolsets:\n  agent: {tools: [\"ops/*\"], discovery: true}\ntoolset_rules:\n  - {client: \"agent*\", toolset: agent}\n")
	url, _ := httpGateway(t, cfg)
	agent := connectHTTPAs(t, url, aliceKey, "agent-1")

	_, env := callE2E(t, agent, discovery.SearchTool, `{"query":"ship a build as a dry run"}`)
	found, _ := env["data"].(map[string]any)["tools"].([]any)
	if len(found) == 0 {
		t.Fatalf("search: %v", env)
	}
	first := found[0].(map[string]any)
	schema, _ := json.Marshal(first["input_schema"])
	if first["name"] != "ship" {
		t.Fatalf("search ranks %v first, want ship", first["name"])
	}
	assertNestedView(t, "search", fmt.Sprint(first["description"]), schema)

	args := `{"name":"web","options":{"dry_run":false}}`
	direct, directEnv := callE2E(t, agent, "ship", args)
	inner, innerEnv := callE2E(t, agent, discovery.CallTool, `{"name":"ship","arguments":`+args+`}`)
	if !sameJSON(t, innerEnv["data"], `{"name":"web","options":{"dry_run":true},"target":{"region":"eu"}}`) {
		t.Errorf("inner call: %v", innerEnv)
	}
	if !reflect.DeepEqual(directEnv, innerEnv) || direct.IsError != inner.IsError {
		t.Errorf("through %s %v, directly %v", discovery.CallTool, innerEnv, directEnv)
	}
	if _, env := callE2E(t, agent, discovery.CallTool, `{"name":"ops__deploy","arguments":{"name":"web"}}`); env["error_code"] != "tool_not_found" {
		t.Errorf("old name through %s: %v", discovery.CallTool, env)
	}
}
