package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/internal/jsonwrite"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/toolschema"
)

// upstreamResult is a tools/call result as an upstream sends it. Fields
// not named here (the upstream's _meta among them) are dropped: the
// client's answer is built fresh.
type upstreamResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
}

// Normalize turns the upstream's raw result into the envelope answer:
// size cap, decoding, sanitising, tool errors, output-schema check, and
// redaction of secrets (r; nil redacts nothing) in the content blocks, the
// data and the error text, after the output-schema check (a redacted value
// may no longer match the tool's schema: the secret leaving would be worse).
func Normalize(r *redact.Redactor) Link {
	return Step("normalize", func(_ context.Context, x *Exchange) *envelope.Error {
		return redactError(r, x, normalize(r, x))
	})
}

func normalize(r *redact.Redactor, x *Exchange) *envelope.Error {
	if limit := x.Tool.MaxResultBytes; limit > 0 && int64(len(x.Raw)) > limit { // 0: no cap
		return envelope.Errorf(envelope.ResultTooLarge, "the result is %d bytes, over the %d byte limit", len(x.Raw), x.Tool.MaxResultBytes)
	}
	var res upstreamResult
	var ok bool
	res.Content, res.StructuredContent, res.IsError, ok = jsonscan.ToolResult(x.Raw)
	if !ok {
		res = upstreamResult{} // what the shortcut read before it gave up
		if err := strictUnmarshal(x.Raw, &res); err != nil {
			return envelope.Errorf(envelope.UpstreamError, "the tool's answer was not a valid tools/call result").WithDetail(err.Error())
		}
	}
	content, texts, err := sanitizeContent(res.Content, r, &x.Redactions)
	if err != nil {
		return envelope.Errorf(envelope.UpstreamError, "the tool's answer was not a valid tools/call result: %s", err.Error())
	}
	if res.IsError {
		// The tool's own text (redacted) is also the reason the log line and
		// the audit record give.
		msg := toolErrorMessage(texts)
		return &envelope.Error{Code: envelope.ToolFailed, Message: msg, Detail: "the tool reported an error: " + msg}
	}
	answer, verr := resultEnvelope(x, res, texts, r)
	if verr != nil {
		return verr
	}
	x.Answer = &mcp.CallToolResult{Content: content, StructuredContent: answer}
	return nil
}

// strictUnmarshal decodes one JSON object and rejects nulls and trailing
// data, so garbage is never half-accepted. (json.Unmarshal already refuses
// trailing data; a decoder would cost allocations on every call.)
func strictUnmarshal(raw json.RawMessage, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return errors.New("empty result")
	}
	return json.Unmarshal(trimmed, v)
}

// maxToolMessage bounds a tool's own error text in a tool_failed message.
const maxToolMessage = 1000

// sanitizeContent decodes every content block, refusing unknown types, and
// cleans every string the client will read, secrets redacted (counted in
// counts). Block-level _meta is dropped. It also returns the text of the
// text blocks.
func sanitizeContent(blocks []json.RawMessage, r *redact.Redactor, counts *redact.Counts) ([]mcp.Content, []string, error) {
	out := make([]mcp.Content, 0, len(blocks))
	var texts []string
	for i, raw := range blocks {
		c, err := decodeBlock(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("content[%d]: %s", i, sanitize.Clip(sanitize.Text(err.Error()), 120))
		}
		if c, err = CleanBlock(c); err != nil {
			return nil, nil, fmt.Errorf("content[%d]: %s", i, err.Error())
		}
		c = redactBlock(r, c, counts)
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
		out = append(out, c)
	}
	return out, texts, nil
}

// textBlock is a text content block decoded in one pass; the type field
// says whether it was one. Other fields of a text block (_meta) are
// dropped anyway.
type textBlock struct {
	Type        string           `json:"type"`
	Text        *string          `json:"text"`
	Annotations *mcp.Annotations `json:"annotations"`
}

// decodeBlock decodes one content block. Text blocks, nearly every block a
// tool sends, take one decode; the others go through mcp-go's decoder,
// which reads the type first and then the whole block again.
func decodeBlock(raw json.RawMessage) (mcp.Content, error) {
	if text, ok := jsonscan.TextBlock(raw); ok {
		return mcp.TextContent{Type: mcp.ContentTypeText, Text: text}, nil
	}
	var tb textBlock
	if err := json.Unmarshal(raw, &tb); err == nil && tb.Type == mcp.ContentTypeText && tb.Text != nil {
		return mcp.TextContent{Annotated: mcp.Annotated{Annotations: tb.Annotations}, Type: mcp.ContentTypeText, Text: *tb.Text}, nil
	}
	return mcp.UnmarshalContent(raw)
}

// CleanBlock sanitises the text-bearing fields of one block and drops its
// _meta (and that of an embedded resource).
func CleanBlock(c mcp.Content) (mcp.Content, error) {
	switch b := c.(type) {
	case mcp.TextContent:
		b.Text, b.Meta = sanitize.Text(b.Text), nil
		return b, nil
	case mcp.ImageContent:
		b.Meta = nil
		return b, nil
	case mcp.AudioContent:
		b.Meta = nil
		return b, nil
	case mcp.EmbeddedResource:
		b.Meta = nil
		b.Resource = CleanResource(b.Resource)
		return b, nil
	case mcp.ResourceLink:
		b.Meta = nil
		b.Name, b.Title, b.Description = sanitize.Text(b.Name), sanitize.Text(b.Title), sanitize.Text(b.Description)
		return b, nil
	}
	return nil, fmt.Errorf("unsupported content type %T", c)
}

// CleanResource sanitises a resource's text and drops its _meta.
func CleanResource(r mcp.ResourceContents) mcp.ResourceContents {
	switch rc := r.(type) {
	case mcp.TextResourceContents:
		rc.Text, rc.Meta = sanitize.Text(rc.Text), nil
		return rc
	case mcp.BlobResourceContents:
		rc.Meta = nil
		return rc
	}
	return r
}

func toolErrorMessage(texts []string) string {
	msg := strings.TrimSpace(strings.Join(texts, "\n"))
	if msg == "" {
		return "the tool reported an error without a message"
	}
	return sanitize.Clip(msg, maxToolMessage)
}

// resultEnvelope is the success envelope of the result. Its data is
// structuredContent when the tool sent it (checked against its declared
// output schema), else the text content: decoded when it is JSON, else the
// text itself, as a string.
func resultEnvelope(x *Exchange, res upstreamResult, texts []string, r *redact.Redactor) (envelope.Encoded, *envelope.Error) {
	structured := len(res.StructuredContent) > 0 && string(res.StructuredContent) != "null"
	if x.Tool.Output != nil {
		if !structured {
			return envelope.Encoded{}, envelope.Errorf(envelope.InvalidResult, "the tool declares an output schema but returned no structured content")
		}
		if err := x.Tool.Output.Validate(res.StructuredContent); err != nil {
			return envelope.Encoded{}, outputViolation(err)
		}
	}
	data := res.StructuredContent
	if !structured {
		var answer envelope.Encoded
		if answer, data = textAnswer(texts); data == nil {
			return answer, nil
		}
	}
	// Strings inside the data reach the model too; JSON escapes such as
	// \u001b survived the text pass, so clean the decoded values.
	clean, err := sanitize.JSON(data)
	if err == nil && structured { // text data was made of the redacted texts
		var counts redact.Counts
		clean, counts, err = r.JSON(clean)
		x.Redactions.Add(counts)
	}
	if err == nil {
		var answer envelope.Encoded
		if answer, err = envelope.SuccessJSON(clean); err == nil {
			return answer, nil
		}
	}
	return envelope.Encoded{}, envelope.Errorf(envelope.UpstreamError, "the tool's structured content is not valid JSON").WithDetail(err.Error())
}

// textAnswer is the envelope of a result without structured content (data
// nil), or the data to clean and wrap first. Its data is the text content:
// JSON when it parses, else the text itself as a string, null with no
// text. Text that is not JSON and is clean as it is (each block's text is,
// and so, nearly always, is their join) is quoted straight into the
// envelope, with nothing to decode, clean or check again: a 5 MiB text went
// through encoding/json's scanner twice more (sanitize.JSON's check, then
// compacting), about 60 ms of CPU, and took two more copies.
func textAnswer(texts []string) (answer envelope.Encoded, data json.RawMessage) {
	if len(texts) == 0 {
		return envelope.Encoded{}, json.RawMessage("null")
	}
	joined := strings.Join(texts, "\n")
	trimmed := strings.TrimSpace(joined)
	switch {
	case mayBeJSON(trimmed) && json.Valid([]byte(trimmed)):
		return envelope.Encoded{}, json.RawMessage(trimmed)
	case sanitize.Text(joined) == joined:
		return envelope.SuccessText(joined), nil
	}
	return envelope.Encoded{}, jsonwrite.Quote(joined)
}

func outputViolation(err error) *envelope.Error {
	var v *toolschema.Violation
	if errors.As(err, &v) {
		return envelope.Errorf(envelope.InvalidResult, "the tool's result does not match its output schema: %s", v.Message)
	}
	return envelope.Errorf(envelope.InvalidResult, "the tool's result does not match its output schema").WithDetail(err.Error())
}

// mayBeJSON reports whether s starts as a JSON value can. Most text is not
// JSON, and json.Valid allocates its syntax error to say so.
func mayBeJSON(s string) bool {
	return s != "" && strings.IndexByte(`{["-0123456789tfn`, s[0]) >= 0
}
