package conformanceserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/listenstream"
)

// answerID keys the single input request (sampling or elicitation) each interactive tool makes.
const answerID = "answer"

// The interactive tools ask the client for input by returning an input_required result built with
// server.InputRequestBuilder (SEP-2322) rather than calling RequestSampling/RequestElicitation:
// a 2026-07-28 client fulfils such a result itself and retries the call, and for older clients
// mcp-go sends the classic sampling/createMessage or elicitation/create request on the call's own
// stream and re-invokes the handler with the answer. One handler serves both protocol eras; the
// direct calls refuse modern clients (ErrServerInitiatedRequestUnsupported).
func addInteractiveTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("test_sampling",
		mcp.WithDescription("Asks the client's LLM to answer a prompt (sampling/createMessage)"),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("The prompt to send to the LLM"))),
		sample)
	s.AddTool(mcp.NewTool("test_elicitation",
		mcp.WithDescription("Asks the user for a username and an email (elicitation/create)"),
		mcp.WithString("message", mcp.Required(), mcp.Description("The message to show the user"))),
		elicit("User response: ", userInfoRequest))
	s.AddTool(mcp.NewTool("test_elicitation_sep1034_defaults",
		mcp.WithDescription("Elicits a form whose fields of every primitive type carry defaults (SEP-1034)")),
		elicit("Elicitation completed: ", constRequest(defaultsMessage, defaultsSchema)))
	s.AddTool(mcp.NewTool("test_elicitation_sep1330_enums",
		mcp.WithDescription("Elicits a form with all five enum variants (SEP-1330)")),
		elicit("Elicitation completed: ", constRequest(enumsMessage, enumsSchema)))
	// The 0.2.0-alpha suite's input-required-result scenarios (protocol 2026-07-28) call this one
	// by name, with the input request key user_name; without it their checks that expect an error
	// pass vacuously on "tool not found" directly.
	s.AddTool(mcp.NewTool("test_input_required_result_elicitation",
		mcp.WithDescription("Asks the user for their name (input request user_name), then greets them (SEP-2322)")),
		greet)
}

const nameSchema = `{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}`

func greet(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if res := server.ElicitationResponse(req.Params.InputResponses, "user_name"); res != nil {
		var answer struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(jsonText(res.Content)), &answer)
		return mcp.NewToolResultText("Hello, " + answer.Name + "!"), nil
	}
	params := mcp.ElicitationParams{Message: "What is your name?", RequestedSchema: json.RawMessage(nameSchema)}
	return server.NewInputRequestBuilder("").Elicit("user_name", params).ToolResult(), nil
}

const userInfoSchema = `{
  "type": "object",
  "properties": {
    "username": {"type": "string", "description": "User's response"},
    "email": {"type": "string", "description": "User's email address"}
  },
  "required": ["username", "email"]
}`

const defaultsMessage = "Please review and update the form fields with defaults"

// defaultsSchema is raw JSON so the defaults keep their exact JSON types (30 is an integer).
const defaultsSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "User name", "default": "John Doe"},
    "age": {"type": "integer", "description": "User age", "default": 30},
    "score": {"type": "number", "description": "User score", "default": 95.5},
    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "description": "Verification status", "default": true}
  }
}`

const enumsMessage = "Please select options from the enum fields"

const enumsSchema = `{
  "type": "object",
  "properties": {
    "untitledSingle": {"type": "string", "description": "Untitled single-select",
      "enum": ["option1", "option2", "option3"]},
    "titledSingle": {"type": "string", "description": "Titled single-select",
      "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
        {"const": "value3", "title": "Third Option"}]},
    "legacyEnum": {"type": "string", "description": "Legacy titled enum (deprecated enumNames)",
      "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
    "untitledMulti": {"type": "array", "description": "Untitled multi-select",
      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    "titledMulti": {"type": "array", "description": "Titled multi-select",
      "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
        {"const": "value3", "title": "Third Choice"}]}}
  }
}`

func sample(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if res := server.SamplingResponse(req.Params.InputResponses, answerID); res != nil {
		return mcp.NewToolResultText("LLM response: " + contentText(res.Content)), nil
	}
	prompt, err := req.RequireString("prompt")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if !clientDeclares(ctx, func(c mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
		return mcp.NewToolResultError("the client does not support sampling (no sampling capability)"), nil
	}
	if !listeningStreamOpen(ctx) {
		return mcp.NewToolResultError("the client has no listening stream (HTTP GET) open to receive sampling/createMessage"), nil
	}
	params := mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}},
		MaxTokens: 100,
	}
	return server.NewInputRequestBuilder("").Sample(answerID, params).ToolResult(), nil
}

// elicit returns a tool that asks the user for the form build makes of the call and reports
// the answer after prefix.
func elicit(prefix string, build func(mcp.CallToolRequest) (mcp.ElicitationParams, error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if res := server.ElicitationResponse(req.Params.InputResponses, answerID); res != nil {
			text := fmt.Sprintf("%saction=%s, content=%s", prefix, res.Action, jsonText(res.Content))
			return mcp.NewToolResultText(text), nil
		}
		params, err := build(req)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if !clientDeclares(ctx, func(c mcp.ClientCapabilities) bool { return c.Elicitation != nil }) {
			return mcp.NewToolResultError("the client does not support elicitation (no elicitation capability)"), nil
		}
		return server.NewInputRequestBuilder("").Elicit(answerID, params).ToolResult(), nil
	}
}

func userInfoRequest(req mcp.CallToolRequest) (mcp.ElicitationParams, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcp.ElicitationParams{}, err
	}
	return mcp.ElicitationParams{Message: msg, RequestedSchema: json.RawMessage(userInfoSchema)}, nil
}

func constRequest(msg, schema string) func(mcp.CallToolRequest) (mcp.ElicitationParams, error) {
	return func(mcp.CallToolRequest) (mcp.ElicitationParams, error) {
		return mcp.ElicitationParams{Message: msg, RequestedSchema: json.RawMessage(schema)}, nil
	}
}

// clientDeclares reports whether the client declared the capability has checks for. A session
// that cannot say (no client info) is given the benefit of the doubt: the request itself will fail
// if the client cannot answer it.
func clientDeclares(ctx context.Context, has func(mcp.ClientCapabilities) bool) bool {
	// From 2026-07-28 capabilities travel with each request and must not be inferred from earlier ones.
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities != nil && has(*info.ClientCapabilities)
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return has(s.GetClientCapabilities())
	}
	return true
}

// listeningStreamOpen waits, for a 2025-era HTTP session, until its client's GET stream is open:
// mcp-go sends the classic sampling request on it alone and loses one sent while no GET is attached
// (see internal/listenstream). Over stdio, and for 2026-07-28 (the client fulfils the input request
// itself), nothing is waited for.
func listeningStreamOpen(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return true
	}
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return true
	}
	return listenstream.AwaitFrom(ctx, cs.SessionID(), listenstream.Grace)
}

// contentText renders sampled content: the text of a text block, JSON for anything else. It goes
// through JSON because the content arrives as mcp.TextContent or as a plain map, depending on the
// path the answer took.
func contentText(c any) string {
	raw := jsonText(c)
	var block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal([]byte(raw), &block) == nil && block.Type == "text" {
		return block.Text
	}
	return raw
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
