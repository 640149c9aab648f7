// Package relay is the zero-check Go relay the load harness compares
// toolgate with (issue 22): an MCP server in front, an MCP client behind,
// written the way most Go MCP proxies are, from mcp-go's README and its
// simple_client example, with nothing checked on the way. No
// authentication, no policy, no schema validation, no audit, no limits, no
// log line per call: the relay lists the upstream's tools once at start,
// registers each under its own name with a handler that passes the request
// to the upstream and its answer back, and serves them over Streamable HTTP
// (server.NewStreamableHTTPServer(...).Start) or stdio (server.ServeStdio).
//
// It is deliberately not tuned: every mcp-go default is kept, so it shows
// what a user who writes the obvious code gets. In particular, over stdio
// mcp-go's server runs tools/calls on its default worker pool of 5, and the
// HTTP server is mcp-go's own http.Server with no timeouts or limits set.
// The only additions are what a harness needs to start it (the listen
// address, and the upstream's environment, passed to mcp-go's client as the
// env it takes) and the protocol version it asks the upstream for, which is
// the one toolgate asks for (see run).
package relay

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Main runs the relay and returns the exit code. Usage (args excludes the
// program name):
//
//	relay [-http ADDR] [-env KEY=VALUE]... -- COMMAND [ARG]...
//
// COMMAND is the upstream, an MCP server over stdio. With -http the relay
// serves Streamable HTTP at http://ADDR/mcp; without it, MCP over its own
// stdin and stdout.
func Main(args []string) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "serve Streamable HTTP on `addr` (path /mcp); stdio when empty")
	var env envFlag
	fs.Var(&env, "env", "`KEY=VALUE` added to the upstream's environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "relay: no upstream command (relay [-http addr] -- command [args...])")
		return 2
	}
	if err := run(*httpAddr, env, fs.Arg(0), fs.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	return 0
}

func run(httpAddr string, env []string, command string, args []string) error {
	// The client behind: mcp-go's stdio client, started on the upstream.
	c, err := client.NewStdioMCPClient(command, env, args...)
	if err != nil {
		return fmt.Errorf("start upstream: %w", err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	initRequest := mcp.InitializeRequest{}
	// The version toolgate asks its upstreams for, and the harness's clients
	// ask every target for: like for like. mcp-go's example asks for
	// mcp.LATEST_PROTOCOL_VERSION (2026-07-28): its client then tries
	// server/discover first and, when the server answers (the mcp-go echo
	// server does, server-everything does not), puts the protocol version,
	// client info and capabilities into every request's _meta, which made
	// the relay a third to 40% slower in front of the echo server
	// (bench/README.md, Against a zero-check relay).
	initRequest.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	initRequest.Params.ClientInfo = mcp.Implementation{Name: "relay", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, initRequest); err != nil {
		return fmt.Errorf("initialize upstream: %w", err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("list upstream tools: %w", err)
	}

	// The server in front: every upstream tool, passed through as it is.
	s := server.NewMCPServer("relay", "1.0.0", server.WithToolCapabilities(false))
	for _, tool := range tools.Tools {
		s.AddTool(tool, func(ctx context.Context, request mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return c.CallTool(ctx, request)
		})
	}
	log.Printf("relaying %d tools of %s", len(tools.Tools), command)

	if httpAddr == "" {
		return server.ServeStdio(s)
	}
	return server.NewStreamableHTTPServer(s).Start(httpAddr)
}

// envFlag collects -env KEY=VALUE.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}
