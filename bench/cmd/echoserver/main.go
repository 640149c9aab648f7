// Command echoserver is the load harness's fast Go upstream (package
// bench/echo) as a stdio MCP server.
package main

import (
	"os"

	"github.com/toolgate/toolgate/bench/echo"
)

func main() {
	os.Exit(echo.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
