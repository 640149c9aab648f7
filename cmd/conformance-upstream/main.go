// Command conformance-upstream runs the MCP server the official conformance suite expects
// upstream (see internal/conformanceserver): over stdio by default, or with -http ADDR over
// Streamable HTTP at http://ADDR/mcp.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/conformanceserver"
)

func main() { os.Exit(conformanceserver.Main(os.Args[1:])) }
