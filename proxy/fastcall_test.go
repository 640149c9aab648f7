package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
)

// Only ids mcp-go writes back with the client's very bytes take the fast
// path: a string without escapes, or an integer of up to 15 digits.
func TestPlainID(t *testing.T) {
	for id, want := range map[string]bool{
		`1`: true, `-4`: true, `0`: true, `123456789012345`: true, `"abc"`: true, `""`: true, `"a-1 b"`: true,
		`1234567890123456`: false, `1.5`: false, `1e3`: false, `01`: false, `-0`: false, `-`: false, `"a\u0041"`: false,
		`"a\"b"`: false, `null`: false, ``: false, `{}`: false, `[1]`: false, `true`: false,
		`"<a&b>"`: false, `"é"`: false, "\"\u2028\"": false, `"tab\t"`: false,
	} {
		if got := plainID(json.RawMessage(id)); got != want {
			t.Errorf("plainID(%s) = %v, want %v", id, got, want)
		}
	}
}

// A session served only by fast calls would look idle to mcp-go, which
// ends sessions idle for its TTL: once a quarter of the TTL passed since
// mcp-go last saw the session, the next call pings mcp-go on it first
// (keepAlive; TestFastCallsKeepTheSessionAlive).
func TestFastPathKeepsSessionsAlive(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := &fastCalls{idleTTL: 8 * time.Minute, now: func() time.Time { return now }}
	entry := &clientSession{}
	f.markSlow(entry)
	cases := []struct {
		after time.Duration
		fresh bool
	}{{0, true}, {time.Minute, true}, {2*time.Minute - time.Nanosecond, true}, {2 * time.Minute, false}, {time.Hour, false}}
	start := now
	for _, c := range cases {
		now = start.Add(c.after)
		if got := f.fresh(entry); got != c.fresh {
			t.Errorf("%v after mcp-go saw the session: fresh %v, want %v", c.after, got, c.fresh)
		}
	}
	f.markSlow(entry)
	if !f.fresh(entry) {
		t.Error("a request handed to mcp-go did not refresh the session")
	}
	if (&fastCalls{now: time.Now}).fresh(&clientSession{}) != true {
		t.Error("without an idle TTL every session is fresh")
	}
}

// The hand-written response has mcp-go's bytes for every result the
// pipeline makes; others are left to encoding/json.
func TestAppendResponseMatchesMCPGo(t *testing.T) {
	results := map[string]*mcp.CallToolResult{
		"text and envelope": {Content: []mcp.Content{mcp.NewTextContent("hi <b>&</b>\u2028")},
			StructuredContent: json.RawMessage(`{"ok":true,"data":{"a": "<x>\u2028"},"error_code":null}`)},
		"tool error": {Content: []mcp.Content{mcp.NewTextContent("tool_failed: boom")}, IsError: true,
			StructuredContent: json.RawMessage(`{"ok":false}`)},
		"no content": {StructuredContent: json.RawMessage(`{"ok":true,"data":null}`)},
		"image and resource": {Content: []mcp.Content{mcp.NewImageContent("AAAA", "image/png"),
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "file:///a", Text: "t"})},
			StructuredContent: json.RawMessage(`{"ok":true}`)},
		"2026-07-28: resultType and _meta": {Result: mcp.Result{Meta: resultMeta(), ResultType: mcp.ResultTypeComplete},
			Content: []mcp.Content{mcp.NewTextContent("a\tb\x01\xff\u2029")}, StructuredContent: json.RawMessage(` {"ok" : true} `)},
		"2026-07-28 tool error": {Result: mcp.Result{Meta: resultMeta(), ResultType: mcp.ResultTypeComplete}, IsError: true,
			Content: []mcp.Content{mcp.NewTextContent("tool_failed: <boom>")}, StructuredContent: json.RawMessage(`{"ok":false}`)},
		"annotated text": {Content: []mcp.Content{mcp.TextContent{Type: "text", Text: "x",
			Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: ptrTo(0.5)}}}}, StructuredContent: json.RawMessage(`{}`)},
		"a large text": {Content: []mcp.Content{mcp.NewTextContent(strings.Repeat("0123456789<>&\"", 100_000))},
			StructuredContent: json.RawMessage(`{"ok":true,"data":"` + strings.Repeat("x", 1_000_000) + `"}`)},
		// What the chain makes: envelope.Encoded, copied as it is.
		"encoded text envelope": {Content: []mcp.Content{mcp.NewTextContent("line 1\n<b>&</b>\u2028")},
			StructuredContent: envelope.SuccessText("line 1\n<b>&</b>\u2028")},
		"encoded failure envelope": pipeline.FailureResult(envelope.Errorf(envelope.ToolFailed, "<boom> & \u2029"), true, true),
	}
	for name, res := range results {
		got, ok := appendResponse(nil, json.RawMessage(`7`), res)
		if !ok {
			t.Errorf("%s: left to encoding/json", name)
			continue
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)), Result: res}); err != nil {
			t.Fatal(err)
		}
		if string(got)+"\n" != want.String() {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want.String())
		}
	}
	for name, res := range map[string]*mcp.CallToolResult{
		"not raw JSON":        {StructuredContent: map[string]any{"ok": true}},
		"invalid JSON":        {StructuredContent: json.RawMessage(`{"ok":`)},
		"raw structured copy": {RawStructuredContent: json.RawMessage(`{}`)},
		"empty encoded":       {StructuredContent: envelope.Encoded{}},
	} {
		if _, ok := appendResponse(nil, json.RawMessage(`7`), res); ok {
			t.Errorf("%s: written by hand", name)
		}
	}
}

// resultMeta is the _meta decorateModern gives a 2026-07-28 result.
func resultMeta() *mcp.Meta {
	m := &mcp.Meta{AdditionalFields: map[string]any{"io.example/x": "<y>"}}
	m.SetServerInfo(mcp.Implementation{Name: "toolgate", Version: "dev"})
	return m
}

func ptrTo[T any](v T) *T { return &v }

// What initialize learnt of a client's capabilities waits for mcp-go to
// register the session; a session never registered is forgotten, and the
// memory of it is bounded.
func TestPendingCapsIsBounded(t *testing.T) {
	var n pendingCaps
	now := time.Unix(1_000_000, 0)
	n.put("declared-roots", clientCaps{known: true, roots: true}, "cursor", now)
	n.put("plain", clientCaps{known: true}, "", now)
	if p, ok := n.take("declared-roots"); !ok || !p.caps.roots || p.caps.sampling || p.client != "cursor" {
		t.Fatalf("declared-roots: %+v %v", p, ok)
	}
	if p, ok := n.take("plain"); !ok || p.caps.roots || p.caps.sampling || p.caps.elicitation {
		t.Fatalf("plain: %+v %v", p, ok)
	}
	if _, ok := n.take("plain"); ok {
		t.Fatal("taken twice")
	}
	for i := range maxPending {
		n.put(fmt.Sprint("abandoned-", i), clientCaps{known: true}, "", now)
	}
	n.put("late", clientCaps{known: true}, "", now.Add(30*time.Second))
	if _, ok := n.take("late"); ok {
		t.Fatal("remembered past the bound while the others are recent")
	}
	n.put("later", clientCaps{known: true}, "", now.Add(2*time.Minute))
	if _, ok := n.take("later"); !ok || len(n.pending) != 0 {
		t.Fatalf("stale sessions were not forgotten: %d left", len(n.pending))
	}
}
