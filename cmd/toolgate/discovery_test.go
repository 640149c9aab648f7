package main

import (
	"encoding/json"
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
