package config

import (
	"strings"
	"testing"
)

// TestClientFileHint: a client's MCP config given as toolgate.yaml is answered with the command that
// converts it, not with its differences from toolgate's schema.
func TestClientFileHint(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, tc := range []struct{ name, file, data, kind string }{
		{"Claude Desktop with preferences", "claude_desktop_config.json",
			`{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"]}}, "preferences": {"menuBarEnabled": false}}`, "Claude Desktop or Cursor"},
		{"Cursor with ${env:NAME}", "mcp.json",
			`{"mcpServers": {"gh": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}}}}`, "Claude Desktop or Cursor"},
		{"Cline with autoApprove", "cline_mcp_settings.json",
			`{"mcpServers": {"a": {"command": "x", "autoApprove": []}}}`, "Claude Desktop or Cursor"},
		{"VS Code mcp.json", "mcp.json",
			`{"servers": {"gh": {"type": "http", "url": "https://example.com/mcp"}}, "inputs": []}`, "VS Code"},
		{"VS Code settings.json", "settings.json",
			`{"editor.fontSize": 14, "mcp": {"servers": {"a": {"command": "x"}}}}`, "VS Code"},
		{"VS Code JSONC", "mcp.json",
			"{\n  // GitHub\n  \"servers\": {\"gh\": {\"type\": \"http\", \"url\": \"https://example.com/mcp\",},},\n}", "VS Code"},
		{"JSONC mcpServers", "mcp.json",
			"// mine\n{\"mcpServers\": {\"a\": {\"command\": \"x\",}}}", "Claude Desktop, Cursor or VS Code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.file, []byte(tc.data), env)
			want := tc.file + ": this looks like a " + tc.kind + " MCP config, not a toolgate config; run `toolgate import " + tc.file +
				"` to write a toolgate config and a starter policy from it"
			if err == nil || err.Error() != want {
				t.Errorf("error:\n got %v\nwant %s", err, want)
			}
		})
	}
}

// TestNoClientFileHintForToolgateConfigs: toolgate's own mistakes keep their precise messages, in YAML or
// JSON, and a client file toolgate can load as it is still loads.
func TestNoClientFileHintForToolgateConfigs(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, tc := range []struct{ name, data, want string }{
		{"misspelt key beside mcpServers", "mcpServers:\n  a: {command: x}\nlimts: {}\n", `limts: unknown key`},
		{"unknown key beside toolgate's own", `{"authz": {"policy": "p.csv"}, "mcpServers": {"a": {"command": "x"}}, "extra": 1}`, `extra: unknown key`},
		{"server typo", "mcpServers:\n  a: {command: x, timout: 5s}\n", `timout: unknown key`},
		{"YAML with servers", "servers:\n  a: {command: x}\n", `servers: unknown key`},
		{"YAML anchor holder beside mcpServers", "x-node: &n {command: x}\nmcpServers:\n  a: *n\n", `x-node: unknown key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("toolgate.yaml", []byte(tc.data), env)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "toolgate import") {
				t.Errorf("error = %v, want %q without the import hint", err, tc.want)
			}
		})
	}
	if _, err := Parse("claude_desktop_config.json", []byte(`{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"]}}}`), env); err != nil {
		t.Errorf("a plain mcpServers file is a valid toolgate config: %v", err)
	}
}
