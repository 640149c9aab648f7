// Package orders is toolgate's built-in demo upstream: a small order-support MCP server with an
// in-memory order book, served by `toolgate demo-orders` over stdio.
//
// It exists so that the gateway can be tried, and tested end to end, against a real upstream whose
// tools have real side effects of different kinds: get_order (read-only), update_order_status
// (idempotent write), refund_order (destructive, not idempotent) and send_customer_reply (not
// idempotent, reaches the outside world). Every tool declares a strict input schema, an output
// schema and all four behaviour hints; every successful result carries structuredContent and the
// same JSON as a text block. Failures the model can act on (unknown order, a refund above what can
// still be refunded, invalid arguments) are tool errors (isError: true) with a plain-text reason.
//
// The store is seeded with orders 4821..4825; 4821 is the order of the seed scenario ("update order
// #4821 to shipped and prepare a reply to the customer"): status processing, 129.99 EUR, region eu.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ServerName and ServerVersion are what the server reports in initialize.
const (
	ServerName    = "toolgate-demo-orders"
	ServerVersion = "1.0.0"
)

// NewServer returns an MCP server with the four order tools over a fresh in-memory store. Each call
// gets its own store, so servers never share state.
func NewServer() *server.MCPServer {
	s := newStore()
	srv := server.NewMCPServer(ServerName, ServerVersion,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions("Demo order-support tools. Look an order up with get_order before changing it; "+
			"refund_order and send_customer_reply act every time they are called, so do not repeat them to retry."),
	)
	for _, d := range tools(s) {
		srv.AddTool(d.tool, wrap(d.handle))
	}
	return srv
}

// wrap turns a handler over decoded arguments into an mcp-go tool handler: results become
// structuredContent plus the same JSON as text; *toolError becomes an isError result.
func wrap(h func(map[string]json.RawMessage) (any, error)) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := decodeArgs(req)
		if err == nil {
			var v any
			v, err = h(args)
			if err == nil {
				b, mErr := json.Marshal(v)
				if mErr != nil {
					return nil, mErr
				}
				return mcp.NewToolResultStructured(json.RawMessage(b), string(b)), nil
			}
		}
		var te *toolError
		if errors.As(err, &te) {
			return mcp.NewToolResultError(te.msg), nil
		}
		return nil, err
	}
}

// ServeStdio serves a fresh NewServer as one MCP session over in and out (newline-delimited JSON-RPC)
// until in reaches EOF or ctx is cancelled; both are a clean end and return nil. Only protocol
// messages are written to out; library diagnostics go to stderr.
//
// mcp-go keeps one process-wide stdio session, so run at most one ServeStdio (or any other mcp-go
// stdio server) per process at a time.
func ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	stdio := server.NewStdioServer(NewServer())
	stdio.SetErrorLogger(log.New(os.Stderr, "demo-orders: ", log.LstdFlags))
	err := stdio.Listen(ctx, in, out)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}
