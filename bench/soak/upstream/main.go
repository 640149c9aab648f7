// Command upstream is internal/testupstream as a program of its own, for the soak run
// (bench/soak): the tool flaky with injected faults (-fault-rate, -faults, -fault-seed, -fault-log),
// over stdio or Streamable HTTP. See testupstream.Main for its flags.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/testupstream"
)

func main() { os.Exit(testupstream.Main(os.Args[1:])) }
