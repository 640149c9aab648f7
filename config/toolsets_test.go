package config

import (
	"os"
	"strings"
	"testing"
)

func TestToolsetsDecode(t *testing.T) {
	src := `mcpServers:
  orders: {command: orders}
  fs: {command: fs}
toolsets:
  support: {tools: ["orders/*"], exclude: [orders/refund_order]}
  ide: {tools: ["fs/*", "*/read_*"], discovery: true}
toolset_rules:
  - {client: "cursor*", toolset: ide}
  - {header: {X-Toolset: support}, role: support_agent, toolset: support}
  - {principal: alice, toolset: support}
`
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Toolsets["support"]
	if s == nil || strings.Join(s.Tools, ",") != "orders/*" || strings.Join(s.Exclude, ",") != "orders/refund_order" || s.Discovery {
		t.Errorf("support = %+v", s)
	}
	if ide := c.Toolsets["ide"]; ide == nil || !ide.Discovery || len(ide.Tools) != 2 {
		t.Errorf("ide = %+v", ide)
	}
	if len(c.ToolsetRules) != 3 {
		t.Fatalf("rules %+v", c.ToolsetRules)
	}
	r := c.ToolsetRules[1]
	if r.Header["X-Toolset"] != "support" || r.Role != "support_agent" || r.Toolset != "support" || r.Client != "" {
		t.Errorf("rule 1 = %+v", r)
	}
	if c.ToolsetRules[0].Client != "cursor*" || c.ToolsetRules[2].Principal != "alice" {
		t.Errorf("rules %+v", c.ToolsetRules)
	}
}

func TestToolsetProblems(t *testing.T) {
	const head = "mcpServers:\n  orders: {command: orders}\n"
	tests := []struct {
		name, src string
		line      int
		key, want string
	}{
		{"no tools", head + "toolsets:\n  s: {discovery: true}\n", 4, "toolsets.s", "expected tools: a list of <server>/<tool> patterns"},
		{"bad name", head + "toolsets:\n  \"a b\": {tools: [orders/x]}\n", 4, `toolsets["a b"]`, "expected a toolset name"},
		{"pattern without server", head + "toolsets:\n  s: {tools: [\"orders\"]}\n", 4, "toolsets.s.tools[0]", "expected a pattern <server>/<tool>"},
		{"bad pattern", head + "toolsets:\n  s: {tools: [\"orders/[a\"]}\n", 4, "toolsets.s.tools[0]", "expected a pattern as path.Match reads it"},
		{"unknown server", head + "toolsets:\n  s: {tools: [orders/x], exclude: [order/y]}\n", 4, "toolsets.s.exclude[0]", `names server "order", which mcpServers does not configure`},
		{"rule without toolset", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {client: x}\n", 6, "toolset_rules[0]", "expected toolset: the name of a toolset"},
		{"rule names no toolset", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {client: x, toolset: t}\n", 6, "toolset_rules[0].toolset", `names toolset "t", which toolsets does not define (defined: s)`},
		{"unreachable rule", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {toolset: s}\n  - {client: x, toolset: s}\n", 7, "toolset_rules[1]", "can never match: toolset_rules[0] before it matches every request"},
		{"bad header name", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {header: {\"X Toolset\": a}, toolset: s}\n", 6, `toolset_rules[0].header["X Toolset"]`, "expected an HTTP header name"},
		{"bad client pattern", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {client: \"[x\", toolset: s}\n", 6, "toolset_rules[0].client", "expected a pattern as path.Match reads it"},
		{"unknown rule key", head + "toolsets:\n  s: {tools: [orders/x]}\ntoolset_rules:\n  - {user: x, toolset: s}\n", 6, "toolset_rules[0].user", "allowed keys here: client, header, principal, role, toolset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, nil)
			if len(probs) != 1 {
				t.Fatalf("want one problem, got %v", probs)
			}
			p := probs[0]
			if p.Line != tt.line || p.Key != tt.key || !strings.Contains(p.Msg, tt.want) {
				t.Errorf("got %d %s %q; want %d %s containing %q", p.Line, p.Key, p.Msg, tt.line, tt.key, tt.want)
			}
		})
	}
}

// The worked example of docs/configuration.md, "Toolsets and discovery", loads (with the servers it
// names configured).
func TestToolsetsDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Toolsets and discovery\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Toolsets and discovery" section`)
	}
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	servers := "mcpServers:\n  orders: {command: o}\n  crm: {command: c}\n  fs: {command: f}\n  git: {command: g}\n"
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(servers+block), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Toolsets) != 2 || len(c.ToolsetRules) != 4 {
		t.Errorf("toolsets %v, rules %v", c.Toolsets, c.ToolsetRules)
	}
}
