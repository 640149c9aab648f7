package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/redact/redacttest"
)

// A client that asks for progress gets the upstream's progress under its
// own token, through the whole gateway, over HTTP and over stdio.
func TestProgressReachesTheClient(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	url, _ := httpGateway(t, cfg)
	clients := map[string]func() *clientWithNotes{
		"http":  func() *clientWithNotes { return notesOf(connectHTTP(t, url, aliceKey)) },
		"stdio": func() *clientWithNotes { return notesOf(connectStdio(t, cfg)) },
	}
	for name, connect := range clients {
		t.Run(name, func(t *testing.T) {
			c := connect()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "hostile__progress"
			req.Params.Arguments = map[string]any{"steps": 10, "ms": 5}
			req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			// Notifications may trail the answer (mcp-go sends them on
			// another goroutine); wait for most of them.
			deadline := time.After(10 * time.Second)
			for c.progress.Load() < 5 {
				select {
				case <-c.changed:
				case <-deadline:
					t.Fatalf("%d of 10 progress notifications arrived", c.progress.Load())
				}
			}
			if c.foreign.Load() != 0 {
				t.Fatalf("%d notifications carried a token other than the client's", c.foreign.Load())
			}
		})
	}
}

// A progress message an upstream sends reaches the client with its secrets
// redacted, as the call's result would be, over HTTP (the fast path) and
// over stdio: a tool that reports "uploading with key AKIA..." must not
// hand the model the key beside the answer that hides it.
func TestProgressMessagesAreRedacted(t *testing.T) {
	sample := redacttest.Samples()[2] // an AWS access key
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	url, logs := httpGateway(t, cfg)
	clients := map[string]func() *clientWithNotes{
		"http":  func() *clientWithNotes { return notesOf(connectHTTP(t, url, aliceKey)) },
		"stdio": func() *clientWithNotes { return notesOf(connectStdio(t, cfg)) },
	}
	for name, connect := range clients {
		t.Run(name, func(t *testing.T) {
			c := connect()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "hostile__progress"
			// mcp-go's stdio server writes a notification from another
			// goroutine than the answer, so the last, sent just before the
			// answer, may reach the gateway after it, when the call has ended
			// and its progress has nowhere to go: the earlier ones, 5 ms
			// apart, are what the test waits for.
			req.Params.Arguments = map[string]any{"steps": 3, "ms": 5, "message": "uploading with " + sample.Text}
			req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
			if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			deadline := time.After(10 * time.Second)
			for c.progress.Load() < 2 {
				select {
				case <-c.changed:
				case <-deadline:
					t.Fatalf("%d of 3 progress notifications arrived (foreign %d)", c.progress.Load(), c.foreign.Load())
				}
			}
			for _, m := range c.progressMessages() {
				if strings.Contains(m, sample.Secret) || !strings.Contains(m, "[redacted:"+sample.Pattern+"]") || !strings.Contains(m, sample.Kept) {
					t.Errorf("progress message %q, want the key redacted and %q kept", m, sample.Kept)
				}
			}
		})
	}
	if strings.Contains(logs.String(), sample.Secret) {
		t.Error("the key reached the gateway's log")
	}
}

// After an upstream changes its tool list, a connected client hears
// tools/list_changed and lists the new tool.
func TestUpstreamListChangeReachesTheClient(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "flip", "")))
	c := notesOf(connectHTTP(t, url, aliceKey, transport.WithContinuousListening()))
	if _, env := callE2E(t, c.Client, "flip__flip_tools", `{}`); env["ok"] != true {
		t.Fatalf("flip: %v", env)
	}
	deadline := time.After(30 * time.Second)
	for c.listChanged.Load() == 0 {
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatal("no tools/list_changed reached the client")
		}
	}
	if !contains(toolNames(t, c.Client), "flip__flipped") {
		t.Fatal("the new tool is not listed")
	}
}
