package conformanceserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Texts the suite's scenario descriptions prescribe, word for word.
const (
	simpleText        = "This is a simple text response for testing."
	errorText         = "This tool intentionally returns an error for testing"
	embeddedURI       = "test://embedded-resource"
	embeddedText      = "This is an embedded resource content."
	mixedIntroText    = "Multiple content types test:"
	mixedResourceURI  = "test://mixed-content-resource"
	mixedResourceJSON = `{"test":"data","value":123}`
)

// schema2020 is json_schema_2020_12_tool's input schema, kept as raw bytes because the
// json-schema-2020-12 scenario checks that $schema, $defs and additionalProperties reach the client
// unchanged; mcp.ToolInputSchema has no fields for the first two.
const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"}
      }
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`

// addContentTools registers the tools whose answer is fixed content of each kind.
func addContentTools(s *server.MCPServer) {
	fixed := func(r *mcp.CallToolResult) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) { return r, nil }
	}
	s.AddTool(mcp.NewTool("test_simple_text", mcp.WithDescription("Returns one text block")),
		fixed(mcp.NewToolResultText(simpleText)))
	s.AddTool(mcp.NewTool("test_image_content", mcp.WithDescription("Returns a 1x1 red PNG image")),
		fixed(contentResult(mcp.NewImageContent(redPixelPNG, "image/png"))))
	s.AddTool(mcp.NewTool("test_audio_content", mcp.WithDescription("Returns a short silent WAV clip")),
		fixed(contentResult(mcp.NewAudioContent(silentWAV, "audio/wav"))))
	s.AddTool(mcp.NewTool("test_embedded_resource", mcp.WithDescription("Returns an embedded text resource")),
		fixed(contentResult(textResource(embeddedURI, "text/plain", embeddedText))))
	s.AddTool(mcp.NewTool("test_multiple_content_types", mcp.WithDescription("Returns text, an image and an embedded resource")),
		fixed(contentResult(
			mcp.NewTextContent(mixedIntroText),
			mcp.NewImageContent(redPixelPNG, "image/png"),
			textResource(mixedResourceURI, "application/json", mixedResourceJSON))))
	// A tool error is a result with isError, not a JSON-RPC error: the model is meant to see it.
	s.AddTool(mcp.NewTool("test_error_handling", mcp.WithDescription("Always fails with isError: true")),
		fixed(mcp.NewToolResultError(errorText)))
	s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool",
		"Tool with JSON Schema 2020-12 features", json.RawMessage(schema2020)), echoArguments)
}

func contentResult(content ...mcp.Content) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: content}
}

func textResource(uri, mimeType, text string) mcp.EmbeddedResource {
	return mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: mimeType, Text: text})
}

// echoArguments answers with the exact argument bytes the client sent, so a caller behind a
// gateway can check that nothing was rewritten on the way.
func echoArguments(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	return mcp.NewToolResultText(fmt.Sprintf("Received arguments: %s", raw)), nil
}
