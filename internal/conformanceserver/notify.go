package conformanceserver

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const loggerName = "conformance-upstream"

// reconnectWork is how long test_reconnection works on after closing its stream, so that the
// answer is made while no stream is open (the point of the scenario, not a courtesy to clients).
const reconnectWork = 50 * time.Millisecond

// addNotifyingTools registers the tools that talk to the client while they run.
func addNotifyingTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("test_tool_with_logging",
		mcp.WithDescription("Sends three info log notifications while it runs, then answers")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return logSteps(ctx, s)
		})
	s.AddTool(mcp.NewTool("test_tool_with_progress",
		mcp.WithDescription("Reports progress 0, 50 and 100 of 100 when given a progress token, then answers")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return progressSteps(ctx, s, req)
		})
	s.AddTool(mcp.NewTool("test_reconnection",
		mcp.WithDescription("Closes its SSE stream before answering, so the client must resume it with Last-Event-ID (SEP-1699)")),
		reconnect)
}

// logSteps and progressSteps send their notifications and answer back to back, as the suite's
// reference server does: on the call's own stream, in order, without a pause (see ordered.go).
func logSteps(ctx context.Context, s *server.MCPServer) (*mcp.CallToolResult, error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, msg := range msgs {
		// The level the client set with logging/setLevel (or, from 2026-07-28, asked for in the
		// request) filters, as mcp-go's SendLogMessageToClient would.
		if !logLevelAllows(ctx, mcp.LoggingLevelInfo) {
			continue
		}
		params := map[string]any{"level": mcp.LoggingLevelInfo, "logger": loggerName, "data": msg}
		if err := notify(ctx, s, string(mcp.MethodNotificationMessage), params); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("log notification %d not sent: %v", i+1, err)), nil
		}
	}
	return mcp.NewToolResultText("Tool with logging executed successfully"), nil
}

func progressSteps(ctx context.Context, s *server.MCPServer, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	// Without a token the client asked for no progress.
	for i, done := range []float64{0, 50, 100} {
		if token == nil {
			break
		}
		err := notify(ctx, s, string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": token, "progress": done, "total": 100,
		})
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("progress notification %d not sent: %v", i+1, err)), nil
		}
	}
	return mcp.NewToolResultText("Tool with progress executed successfully"), nil
}

// reconnect closes the call's SSE stream (when served by HTTPHandler) and then answers: the
// answer can only reach the client through a GET carrying Last-Event-ID.
func reconnect(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if !closeSSEStream(ctx) {
		// stdio, in-process, or an HTTP host without SEP-1699 support: answer normally.
		return mcp.NewToolResultText("Reconnection test completed (stream was not closed: transport cannot poll)"), nil
	}
	// Work on after the close, as a long-running call would; the answer is held for the resume.
	if err := pause(ctx, reconnectWork); err != nil {
		return nil, err
	}
	return mcp.NewToolResultText("Reconnection test completed: answer delivered on the resumed stream"), nil
}

// pause waits d, or less if the call is cancelled.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
