package proxy

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/redact/redacttest"
)

// TestPromptsAndResourcesAreRedacted: what an upstream sends outside
// tools/call reaches the client redacted too: a prompt's description and
// messages, a resource's text (JSON decoded, so an escape hides nothing).
func TestPromptsAndResourcesAreRedacted(t *testing.T) {
	r, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	aws := redacttest.Samples()[2].Secret
	gh := redacttest.Samples()[8].Secret
	res := &mcp.GetPromptResult{Description: "uses " + aws, Messages: []mcp.PromptMessage{
		{Role: mcp.RoleUser, Content: mcp.NewTextContent("token " + gh)},
		{Role: mcp.RoleUser, Content: mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "file:///env", Text: "KEY=" + aws})},
	}}
	out, err := cleanPrompt(res, r)
	if err != nil {
		t.Fatal(err)
	}
	text := out.Description + out.Messages[0].Content.(mcp.TextContent).Text +
		out.Messages[1].Content.(mcp.EmbeddedResource).Resource.(mcp.TextResourceContents).Text
	if strings.Contains(text, aws) || strings.Contains(text, gh) || strings.Count(text, "[redacted:") != 3 {
		t.Fatalf("prompt after redaction: %q", text)
	}
	rc := pipeline.RedactResource(r, mcp.TextResourceContents{URI: "file:///c.json", Text: `{"k":"\u0041` + aws[1:] + `"}`})
	if got := rc.(mcp.TextResourceContents).Text; strings.Contains(got, aws[1:]) || !strings.Contains(got, "[redacted:aws_access_key]") {
		t.Fatalf("resource after redaction: %q", got)
	}
	if got, _ := cleanPrompt(&mcp.GetPromptResult{Description: "d " + aws}, nil); got.Description != "d "+aws {
		t.Error("a nil redactor changed a prompt")
	}
}

// TestLogNotificationsAreRedacted: a log message an upstream sends during
// a call is sanitised and redacted before the relay passes it on.
func TestLogNotificationsAreRedacted(t *testing.T) {
	r, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jwt := redacttest.Samples()[1].Secret
	got, err := (&clientRelay{redact: r}).cleanLog([]byte(`{"level":"error","logger":"db","data":{"msg":"auth failed for \u001b[31m` + jwt + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), jwt) || !strings.Contains(string(got), "[redacted:jwt]") || strings.Contains(string(got), "\u001b") {
		t.Fatalf("log params passed on as %s", got)
	}
}
