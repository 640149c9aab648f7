// Command relay is the load harness's zero-check Go relay (package
// bench/relay): mcp-go's server in front, mcp-go's client behind, the
// upstream's tools passed through, nothing checked.
//
//	relay -http 127.0.0.1:8090 -- ./echoserver
package main

import (
	"os"

	"github.com/toolgate/toolgate/bench/relay"
)

func main() {
	os.Exit(relay.Main(os.Args[1:]))
}
