package conformanceserver

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// step is the pause between the notifications of one call. The scenarios ask for ~50 ms so that a
// client sees the notifications arrive one by one while the call is still running.
//
// The tools also pause one step after their last notification. Without it mcp-go's Streamable
// HTTP transport can drop that notification: its forwarder may have taken it off the session
// channel but not yet written it when the answer is sent, and then discards it
// (server/streamable_http.go:823-834 with 965-973). HTTPHandler's event store closes that gap for
// requests before 2026-07-28, but mcp-go never uses the store for 2026-07-28 requests.
const step = 50 * time.Millisecond

const loggerName = "conformance-upstream"

// addNotifyingTools registers the tools that talk to the client while they run.
func addNotifyingTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("test_tool_with_logging",
		mcp.WithDescription("Sends three info log notifications, 50 ms apart, while it runs")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return logSteps(ctx, s)
		})
	s.AddTool(mcp.NewTool("test_tool_with_progress",
		mcp.WithDescription("Reports progress 0, 50 and 100 of 100, 50 ms apart, when given a progress token")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return progressSteps(ctx, s, req)
		})
	s.AddTool(mcp.NewTool("test_reconnection",
		mcp.WithDescription("Closes its SSE stream before answering, so the client must resume it with Last-Event-ID (SEP-1699)")),
		reconnect)
}

func logSteps(ctx context.Context, s *server.MCPServer) (*mcp.CallToolResult, error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, msg := range msgs {
		// SendLogMessageToClient, not a raw notification: it honours the level the client set
		// with logging/setLevel (or, from 2026-07-28, asked for in the request).
		n := mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, loggerName, msg)
		if err := s.SendLogMessageToClient(ctx, n); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("log notification %d not sent: %v", i+1, err)), nil
		}
		if err := pause(ctx, step); err != nil {
			return nil, err
		}
	}
	return mcp.NewToolResultText("Tool with logging executed successfully"), nil
}

func progressSteps(ctx context.Context, s *server.MCPServer, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	for i, done := range []float64{0, 50, 100} {
		// Without a token the client asked for no progress: only the work (the pauses) is done.
		if token != nil {
			err := s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": token, "progress": done, "total": 100,
			})
			if err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("progress notification %d not sent: %v", i+1, err)), nil
			}
		}
		if err := pause(ctx, step); err != nil {
			return nil, err
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
	if err := pause(ctx, step); err != nil {
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
