package discovery

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/upstreams"
)

// How many tools a search returns: DefaultLimit unless the model asks
// for up to MaxLimit. The right tool is among the first five for 9 in 10
// of the queries TestSearchQuality measures, and five tools with their
// input schemas are a few thousand tokens (about 6,000 for five of the
// Twilio API's tools, whose schemas are among the largest there).
const (
	DefaultLimit   = 5
	MaxLimit       = 20
	maxQueryLength = 500
)

var (
	searchInput = json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","minLength":1,"maxLength":500,"description":"What you want to do, in a few words, e.g. \"refund an order\"."},` +
		`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return; 5 when not given."}},` +
		`"required":["query"],"additionalProperties":false}`)
	// searchOutput is the envelope's data of a search.
	searchOutput = json.RawMessage(`{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object",` +
		`"properties":{"name":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},"input_schema":{"type":"object"}},` +
		`"required":["name","input_schema"]}}},"required":["tools"]}`)
	callInput = json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The tool's name, as ` + SearchTool + ` returned it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, matching its input schema."}},` +
		`"required":["name"],"additionalProperties":false}`)
)

// Tools are the two meta-tools a discovery client is listed instead of
// the catalog.
func Tools() []mcp.Tool {
	yes, no := true, false
	return []mcp.Tool{
		{
			Name:  SearchTool,
			Title: "Search tools",
			Description: "Find the tools you can use for a task: describe the task in a few words. The best matches come back " +
				"with their names, descriptions and input schemas; call one with " + CallTool + ".",
			RawInputSchema:  searchInput,
			RawOutputSchema: envelope.OutputSchema(searchOutput),
			Annotations:     mcp.ToolAnnotation{ReadOnlyHint: &yes, DestructiveHint: &no, IdempotentHint: &yes, OpenWorldHint: &no},
		},
		{
			Name:  CallTool,
			Title: "Call a tool",
			Description: "Call a tool that " + SearchTool + " found, by its name, with arguments that match its input schema. " +
				"The answer is the tool's own.",
			RawInputSchema:  callInput,
			RawOutputSchema: envelope.OutputSchema(nil),
		},
	}
}

// ParseSearch reads a search's arguments: the query and how many tools to
// return.
func ParseSearch(args json.RawMessage) (query string, limit int, err *envelope.Error) {
	var a struct {
		Query *string          `json:"query"`
		Limit *json.RawMessage `json:"limit"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(args)) == 0 || dec.Decode(&a) != nil {
		return "", 0, badSearch()
	}
	if a.Query == nil || *a.Query == "" || utf8.RuneCountInString(*a.Query) > maxQueryLength {
		return "", 0, badSearch()
	}
	limit = DefaultLimit
	if a.Limit != nil {
		var n int
		if json.Unmarshal(*a.Limit, &n) != nil || n < 1 || n > MaxLimit {
			return "", 0, envelope.Errorf(envelope.InvalidArguments, "limit: expected a whole number from 1 to %d", MaxLimit)
		}
		limit = n
	}
	return *a.Query, limit, nil
}

func badSearch() *envelope.Error {
	return envelope.Errorf(envelope.InvalidArguments,
		"expected {\"query\": \"<what you want to do, 1 to %d characters>\", \"limit\": <1 to %d, optional>}", maxQueryLength, MaxLimit)
}

// ParseCall reads a call's arguments: the inner tool's name, and its
// arguments as the exact bytes the client sent (nil when absent), so the
// inner call is validated and forwarded as a direct call's would be.
func ParseCall(args json.RawMessage) (name string, inner json.RawMessage, err *envelope.Error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(args, &fields) != nil || fields == nil {
		return "", nil, badCall()
	}
	for k := range fields {
		if k != "name" && k != "arguments" {
			return "", nil, badCall()
		}
	}
	if json.Unmarshal(fields["name"], &name) != nil || name == "" {
		return "", nil, badCall()
	}
	return name, fields["arguments"], nil
}

func badCall() *envelope.Error {
	return envelope.Errorf(envelope.InvalidArguments,
		"expected {\"name\": \"<a tool's name from %s>\", \"arguments\": {<its arguments>}}", SearchTool)
}

// A search answer's data: each tool as a model needs it to call it.
type searchData struct {
	Tools []foundTool `json:"tools"`
}

type foundTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// SearchData is the envelope's data for hits: the tools as the model is
// to call them (client-facing name and input schema, as tools/list would
// list them).
func SearchData(hits []Hit) any {
	d := searchData{Tools: make([]foundTool, len(hits))}
	for i, h := range hits {
		d.Tools[i] = foundTool{Name: h.Tool.Name, Title: h.Tool.Title, Description: h.Tool.Description, InputSchema: h.Tool.InputSchema}
	}
	return d
}

// Keep is the filter a search applies: a tool is found only when visible
// says the caller may call it and it is callable now (not a stand-in for a
// server that is down, nor blocked by its pin).
func Keep(visible func(*upstreams.Tool) bool) func(*upstreams.Tool) bool {
	return func(t *upstreams.Tool) bool { return !t.Unreachable && !t.Changed && visible(t) }
}
