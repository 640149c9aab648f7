package config

import "testing"

// argumentProblems are the TestProblems cases of limits.max_argument_bytes and limits.max_argument_depth
// (issue 16, item 7).
var argumentProblems = func() []problemCase {
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	return []problemCase{
		{"max_argument_bytes too small", "limits: {max_argument_bytes: 100}\n", nil, 1, "limits.max_argument_bytes",
			"expected a number of bytes from 1024 (1 KiB) to 67108864 (64 MiB), got 100"},
		{"max_argument_bytes too large", "limits:\n  max_argument_bytes: 100000000\n", nil, 2, "limits.max_argument_bytes",
			"expected a number of bytes from 1024 (1 KiB) to 67108864 (64 MiB), got 100000000"},
		{"max_argument_bytes negative", "limits: {max_argument_bytes: -1}\n", nil, 1, "limits.max_argument_bytes", "got -1"},
		{"max_argument_bytes a string", "limits: {max_argument_bytes: 1MiB}\n", nil, 1, "limits.max_argument_bytes", `got the string "1MiB"`},
		{"max_argument_depth too deep", "limits: {max_argument_depth: 5000}\n", nil, 1, "limits.max_argument_depth",
			"expected a whole number from 1 to 1000, got 5000"},
		{"max_argument_depth negative", "limits: {max_argument_depth: -3}\n", nil, 1, "limits.max_argument_depth", "from 1 to 1000, got -3"},
		{"max_argument_depth a fraction", "limits: {max_argument_depth: 2.5}\n", nil, 1, "limits.max_argument_depth",
			"expected a whole number such as 5, got the number 2.5"},
		{"max_argument_bytes on a server", stdio + "    max_argument_bytes: 2048\n", nil, 4, "mcpServers.orders.max_argument_bytes", "unknown key"},
		{"max_argument_depth on a tool", stdio + "    tools: {t: {max_argument_depth: 8}}\n", nil, 4, "mcpServers.orders.tools.t.max_argument_depth", "unknown key"},
	}
}()

func TestArgumentLimits(t *testing.T) {
	var zero Config
	if got := zero.MaxArgumentBytes(); got != 1<<20 {
		t.Errorf("default MaxArgumentBytes = %d, want 1 MiB", got)
	}
	if got := zero.MaxArgumentDepth(); got != 64 {
		t.Errorf("default MaxArgumentDepth = %d, want 64", got)
	}
	c, err := Parse("toolgate.yaml", []byte("limits:\n  max_argument_bytes: 4096\n  max_argument_depth: 8\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MaxArgumentBytes(); got != 4096 {
		t.Errorf("MaxArgumentBytes = %d, want 4096", got)
	}
	if got := c.MaxArgumentDepth(); got != 8 {
		t.Errorf("MaxArgumentDepth = %d, want 8", got)
	}
}
