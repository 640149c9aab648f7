// Package echo is the fast upstream of the load harness: an mcp-go stdio
// server whose tool "echo" answers its "message" argument as text. It does
// nothing else on purpose, so that what a measurement through a gateway adds
// over calling it directly is the gateway's cost. It can also expose extra
// tools, for the catalog-size figures.
package echo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tool is the name of the echo tool.
const Tool = "echo"

// Blob is the name of the tool that answers a text of "bytes" bytes (at
// most MaxBlob), for the memory figure with large results.
const Blob = "blob"

// MaxBlob is the largest text blob answers.
const MaxBlob = 64 << 20

// ExtraName is the name of the i-th extra tool: tool_00000, tool_00001, ...
// Fixed width keeps the names sortable and the policy generator simple.
func ExtraName(i int) string { return fmt.Sprintf("tool_%05d", i) }

// Main serves one client on stdin/stdout until stdin ends, and returns the
// exit code. Flags (args excludes the program name):
//
//	-name NAME         server name reported in initialize (default echo)
//	-extra-tools N     also expose tool_00000 .. tool_{N-1}, each answering "ok"
//	-workers N         mcp-go's tools/call worker pool (default 16)
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("echoserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "echo", "server `name` reported in initialize")
	extra := fs.Int("extra-tools", 0, "expose `N` extra tools besides echo")
	workers := fs.Int("workers", 16, "tools/call worker pool `size`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stdio := server.NewStdioServer(New(*name, *extra))
	stdio.SetErrorLogger(log.New(stderr, "echoserver: ", 0))
	// mcp-go's default pool is 5: enough for a handler this cheap, but a
	// gateway in front may keep 64 calls in flight and the queue must not be
	// the limit being measured.
	server.WithWorkerPoolSize(*workers)(stdio)
	if err := stdio.Listen(context.Background(), stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "echoserver:", err)
		return 1
	}
	return 0
}

// New builds the server: echo plus extra tools that each take one optional
// string, so that every tool in a large catalog has a schema to compile.
func New(name string, extra int) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool(Tool,
		mcp.WithDescription("Answers its message as text."),
		mcp.WithString("message", mcp.Required(), mcp.Description("the text to answer")),
	), handleEcho)
	s.AddTool(mcp.NewTool(Blob,
		mcp.WithDescription("Answers a text of the given number of bytes."),
		mcp.WithNumber("bytes", mcp.Required(), mcp.Description("the text's length")),
		mcp.WithString("tag", mcp.Description("ignored: makes calls distinct"))), handleBlob)
	tools := make([]server.ServerTool, 0, extra)
	for i := range extra {
		tools = append(tools, server.ServerTool{
			Tool: mcp.NewTool(ExtraName(i),
				mcp.WithDescription("A filler tool for catalog-size measurements."),
				mcp.WithString("note", mcp.Description("ignored"))),
			Handler: handleExtra,
		})
	}
	if len(tools) > 0 {
		s.AddTools(tools...)
	}
	return s
}

func handleEcho(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(msg), nil
}

func handleBlob(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := req.RequireInt("bytes")
	if err != nil || n < 0 || n > MaxBlob {
		return mcp.NewToolResultError(fmt.Sprintf("bytes: expected 0 to %d", MaxBlob)), nil
	}
	return mcp.NewToolResultText(strings.Repeat("x", n)), nil
}

func handleExtra(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("ok"), nil
}
