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
	for name, connect := range progressClients(t, cfg, url) {
		t.Run(name, func(t *testing.T) {
			c := connect()
			// Notifications may trail the answer (mcp-go sends them on
			// another goroutine); wait for most of them.
			callWithProgress(t, c, map[string]any{"steps": 10, "ms": 5}, 5)
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
	for name, connect := range progressClients(t, cfg, url) {
		t.Run(name, func(t *testing.T) {
			c := connect()
			// mcp-go's stdio server writes a notification from another
			// goroutine than the answer, so the last, sent just before the
			// answer, may reach the gateway after it, when the call has ended
			// and its progress has nowhere to go: the earlier ones, 5 ms
			// apart, are what the test waits for.
			callWithProgress(t, c, map[string]any{"steps": 3, "ms": 5, "message": "uploading with " + sample.Text}, 2)
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

// progressClients connect a client that records its progress notifications
// to the gateway at url (Streamable HTTP) or to one on cfg over stdio.
func progressClients(t *testing.T, cfg, url string) map[string]func() *clientWithNotes {
	return map[string]func() *clientWithNotes{
		"http":  func() *clientWithNotes { return notesOf(connectHTTP(t, url, aliceKey)) },
		"stdio": func() *clientWithNotes { return notesOf(connectStdio(t, cfg)) },
	}
}

// callWithProgress calls hostile__progress with args under the token
// notesOf counts, and waits until at least atLeast of its progress
// notifications have arrived.
func callWithProgress(t *testing.T, c *clientWithNotes, args map[string]any, atLeast int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "hostile__progress"
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
	if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	deadline := time.After(10 * time.Second)
	for c.progress.Load() < atLeast {
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("%d of %v progress notifications arrived (foreign %d)", c.progress.Load(), args["steps"], c.foreign.Load())
		}
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
