package targets

import (
	"fmt"
	"runtime/debug"
)

// Client is the load client the sessions of a target are opened with.
type Client string

const (
	// Lean is the harness's own client (lean_*.go): a full MCP session
	// with hand-encoded JSON-RPC, cheap enough that on a 2-core machine the
	// client's CPU does not distort what the gateways are measured at.
	Lean Client = "lean"
	// MCPGo is mcp-go's client, about 86 µs of CPU per call over
	// Streamable HTTP and 30 µs over stdio here.
	MCPGo Client = "mcp-go"
)

// ParseClient reads the -client flag.
func ParseClient(s string) (Client, error) {
	switch c := Client(s); c {
	case Lean, MCPGo:
		return c, nil
	}
	return "", fmt.Errorf("unknown load client %q (lean or mcp-go)", s)
}

// Describe says what the client is, for the report.
func (c Client) Describe() string {
	if c == MCPGo {
		return "mcp-go (github.com/mark3labs/mcp-go " + mcpGoVersion() + " client)"
	}
	return "lean (native, hand-encoded JSON-RPC over net/http / pipes)"
}

// mcpGoVersion is the mcp-go module this binary was built with.
func mcpGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/mark3labs/mcp-go" {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}
