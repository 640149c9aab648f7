package pipeline_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

// invisibles are the characters that show nothing but a model still reads:
// zero-width space, non-joiner, word joiner, BOM, and Unicode tag characters
// spelling "ignore" (ASCII smuggling). Raw in the text, and as JSON escapes
// (surrogate pairs for the tags) in the structured data.
const (
	invisibleRaw     = "\u200b\u200c\u2060\ufeff\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065\U000E007F"
	invisibleEscaped = `\u200b\u200c\u2060\ufeff\udb40\udc69\udb40\udc67\udb40\udc6e\udb40\udc6f\udb40\udc72\udb40\udc65\udb40\udc7f`
)

// hasInvisible reports a zero-width or tag character left in s.
func hasInvisible(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r >= 0x200b && r <= 0x200f || r == 0x2060 || r == 0xfeff || r >= 0xe0000 && r <= 0xe007f
	})
}

// Zero-width and tag characters from an upstream are dropped like the
// control characters (TestUpstreamMetaAndControlCharsDropped): from content
// text, from structured data (values and keys) and from a tool_failed
// message, whether the tool failed with isError or with a JSON-RPC error.
func TestUpstreamInvisibleCharsDroppedLikeControlChars(t *testing.T) {
	text, _ := json.Marshal("sta" + invisibleRaw + "tus: shipped")
	raw := `{"content":[{"type":"text","text":` + string(text) + `}],` +
		`"structuredContent":{"value":7,"no` + invisibleEscaped + `te":"de` + invisibleEscaped + `livered"}}`
	res := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)}).Handle(context.Background(),
		pipeline.Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)})
	env := pipelinetest.Envelope(t, res)
	if !env.OK {
		t.Fatalf("call failed: %+v", env)
	}
	if got := res.Content[0].(mcp.TextContent).Text; got != "status: shipped" {
		t.Errorf("content text %q, want %q", got, "status: shipped")
	}
	var data map[string]any
	if err := json.Unmarshal(env.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data["note"] != "delivered" || hasInvisible(string(env.Data)) {
		t.Errorf("structured data kept invisible characters: %+q", env.Data)
	}

	failed := `{"content":[{"type":"text","text":` + string(text) + `}],"isError":true}`
	env = pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(failed)}).Handle(context.Background(),
		pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "tool_failed" || *env.Message != "status: shipped" {
		t.Errorf("isError message %+q (%s), want %q", *env.Message, pipelinetest.Code(env), "status: shipped")
	}

	rpc := &upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Code: -32603, Message: "db" + invisibleRaw + " down"}}
	env = pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(rpc)}).Handle(context.Background(),
		pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "tool_failed" || *env.Message != "db down" {
		t.Errorf("JSON-RPC error message %+q (%s), want %q", *env.Message, pipelinetest.Code(env), "db down")
	}
}
