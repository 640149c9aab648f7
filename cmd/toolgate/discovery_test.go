package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/toolgate/toolgate/discovery"
)

// discoveryYAML gives clients that call themselves agent-* discovery over
// the test upstream's tools, less sleep. The upstream is named hostile, so
// the test policy denies alice hostile/headers.
const discoveryYAML = `toolsets:
  agent: {tools: ["hostile/*"], exclude: [hostile/sleep], discovery: true}
toolset_rules:
  - {client: "agent*", toolset: agent}
`

// searchE2E runs the search meta-tool and returns the names it found, best
// first.
func searchE2E(t *testing.T, c *client.Client, query string) []string {
	t.Helper()
	q, _ := json.Marshal(query)
	_, env := callE2E(t, c, discovery.SearchTool, `{"query":`+string(q)+`}`)
	if env["ok"] != true {
		t.Fatalf("search %q: %v", query, env)
	}
	var names []string
	for _, tool := range env["data"].(map[string]any)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	return names
}

// Through real mcp-go clients of one principal: a discovery client is
// listed the two meta-tools alone; its search ranks the tool that fits a
// query first and never returns a tool the policy denies or its toolset
// leaves out; a call through the call meta-tool answers exactly the
// envelope a direct call answers, whether it runs, breaks the tool's
// schema, is denied by policy or names a tool outside the toolset, and the
// gateway records the tool itself; a client without discovery is listed
// the tools and not the meta-tools.
func TestDiscoveryEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+discoveryYAML)
	url, logs := httpGateway(t, cfg)
	agent := connectHTTPAs(t, url, aliceKey, "agent-1")
	plain := connectHTTP(t, url, aliceKey)

	listed := toolNames(t, agent)
	slices.Sort(listed)
	if strings.Join(listed, ",") != discovery.CallTool+","+discovery.SearchTool {
		t.Fatalf("a discovery client is listed %v, want the two meta-tools", listed)
	}
	if names := toolNames(t, plain); contains(names, discovery.SearchTool) || contains(names, discovery.CallTool) || !contains(names, "hostile__big") {
		t.Errorf("a client without discovery is listed %v", names)
	}

	for query, want := range map[string]string{
		"return a block of text of a given number of bytes": "hostile__big",
		"report a tool error":                               "hostile__fail",
		"return my arguments exactly as sent":               "hostile__echo",
	} {
		if got := searchE2E(t, agent, query); len(got) == 0 || got[0] != want {
			t.Errorf("search %q: %v, want %s first", query, got, want)
		}
	}
	for _, query := range []string{"request headers the upstream received", "headers", "wait milliseconds until cancelled", "sleep"} {
		if got := searchE2E(t, agent, query); contains(got, "hostile__headers") || contains(got, "hostile__sleep") {
			t.Errorf("search %q found %v: a denied tool or one outside the toolset", query, got)
		}
	}
	if _, env := callE2E(t, plain, discovery.SearchTool, `{"query":"echo"}`); env["error_code"] != "tool_not_found" {
		t.Errorf("search by a client without discovery: %v, want tool_not_found", env)
	}

	for _, tc := range []struct {
		name, tool, args, code string
	}{
		{"runs", "hostile__big", `{"bytes":3}`, ""},
		{"breaks the schema", "hostile__big", `{"bytes":"three"}`, "invalid_arguments"},
		{"arguments not an object", "hostile__big", `[3]`, "invalid_arguments"},
		{"denied by policy", "hostile__headers", `{}`, "tool_not_allowed"},
		{"outside the toolset", "hostile__sleep", `{"ms":1}`, "tool_not_found"},
		{"no such tool", "hostile__nope", `{}`, "tool_not_found"},
	} {
		direct, directEnv := callE2E(t, agent, tc.tool, tc.args)
		inner, innerEnv := callE2E(t, agent, discovery.CallTool, `{"name":"`+tc.tool+`","arguments":`+tc.args+`}`)
		if code, _ := directEnv["error_code"].(string); code != tc.code {
			t.Errorf("%s: direct call %v, want error_code %q", tc.name, directEnv, tc.code)
		}
		if !reflect.DeepEqual(directEnv, innerEnv) || direct.IsError != inner.IsError || !reflect.DeepEqual(direct.Content, inner.Content) {
			t.Errorf("%s: through %s %v (isError %v), directly %v (isError %v)", tc.name, discovery.CallTool, innerEnv, inner.IsError, directEnv, direct.IsError)
		}
	}
	var recorded []any
	for _, rec := range logs.Records("tools/call") {
		if rec["id"] == "hostile/big" {
			recorded = append(recorded, rec["error_code"])
		}
	}
	if len(recorded) != 6 {
		t.Errorf("hostile/big calls recorded: %v, want 6 (3 direct, 3 through %s)", recorded, discovery.CallTool)
	}

	if _, env := callE2E(t, agent, discovery.CallTool, `{"arguments":{}}`); env["error_code"] != "invalid_arguments" ||
		!strings.Contains(env["message"].(string), `"name"`) {
		t.Errorf("%s without a name: %v", discovery.CallTool, env)
	}
	if _, env := callE2E(t, agent, discovery.SearchTool, `{"query":""}`); env["error_code"] != "invalid_arguments" {
		t.Errorf("an empty search: %v", env)
	}
}

// The official TypeScript SDK, whose client validates structuredContent
// against each listed tool's outputSchema, is picked a discovery toolset by
// its clientInfo name, is listed the two meta-tools, and accepts their
// answers: a search, an inner call that runs, one that breaks the tool's
// schema, and a search it cannot read.
func TestTypeScriptSDKDiscovery(t *testing.T) {
	script, _ := filepath.Abs("../../e2e/ts/client.mjs")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat("../../e2e/ts/node_modules/@modelcontextprotocol/sdk")
	if err != nil || modErr != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("node (%v) or the SDK in e2e/ts/node_modules (%v) missing", err, modErr)
		}
		t.Skip("node or e2e/ts/node_modules missing: run npm install in e2e/ts")
	}
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+strings.Replace(discoveryYAML, `"agent*"`, `"toolgate-e2e-ts"`, 1))
	url, _ := httpGateway(t, cfg)
	out, err := exec.Command(node, script, url, aliceKey,
		discovery.SearchTool, `{"query":"return a block of text of a given number of bytes"}`,
		discovery.CallTool, `{"name":"hostile__big","arguments":{"bytes":2}}`,
		discovery.CallTool, `{"name":"hostile__big","arguments":{"bytes":"two"}}`,
		discovery.CallTool, `{"name":"hostile__good_output","arguments":{}}`,
		discovery.SearchTool, `{"query":""}`,
	).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("TypeScript client failed: %v\n%s", err, stderr)
	}
	var got struct {
		Tools []string `json:"tools"`
		Calls []struct {
			Name              string         `json:"name"`
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	slices.Sort(got.Tools)
	if strings.Join(got.Tools, ",") != discovery.CallTool+","+discovery.SearchTool {
		t.Errorf("the TypeScript client is listed %v, want the two meta-tools", got.Tools)
	}
	want := []any{nil, nil, "invalid_arguments", nil, "invalid_arguments"}
	if len(got.Calls) != len(want) {
		t.Fatalf("%d calls answered, want %d: %s", len(got.Calls), len(want), out)
	}
	for i, code := range want {
		if c := got.Calls[i]; c.StructuredContent["error_code"] != code || c.IsError != (code != nil) {
			t.Errorf("call %d (%s): isError=%v envelope=%v, want code %v", i, c.Name, c.IsError, c.StructuredContent, code)
		}
	}
	if found, _ := got.Calls[0].StructuredContent["data"].(map[string]any)["tools"].([]any); len(found) == 0 ||
		found[0].(map[string]any)["name"] != "hostile__big" {
		t.Errorf("search answer %v, want hostile__big first", got.Calls[0].StructuredContent)
	}
}

// Over stdio, where every call goes through mcp-go's handler rather than
// the HTTP fast path, the meta-tools behave the same.
func TestDiscoveryOverStdio(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+discoveryYAML)
	c := connectStdioAs(t, cfg, "agent-stdio")
	if names := toolNames(t, c); len(names) != 2 || !contains(names, discovery.SearchTool) {
		t.Fatalf("listed %v, want the two meta-tools", names)
	}
	if got := searchE2E(t, c, "return a block of text of a given number of bytes"); len(got) == 0 || got[0] != "hostile__big" {
		t.Errorf("search: %v", got)
	}
	for _, args := range []string{`{"bytes":2}`, `{"bytes":"two"}`} {
		_, direct := callE2E(t, c, "hostile__big", args)
		_, inner := callE2E(t, c, discovery.CallTool, `{"name":"hostile__big","arguments":`+args+`}`)
		if !reflect.DeepEqual(direct, inner) {
			t.Errorf("%s: through %s %v, directly %v", args, discovery.CallTool, inner, direct)
		}
	}
}
