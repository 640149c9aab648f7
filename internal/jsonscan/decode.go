package jsonscan

import "encoding/json"

// ToolResult decodes the usual tools/call result as json.Unmarshal
// decodes it, after trimming surrounding whitespace, into
//
//	struct {
//		Content           []json.RawMessage `json:"content"`
//		StructuredContent json.RawMessage   `json:"structuredContent"`
//		IsError           bool              `json:"isError"`
//	}
//
// members content (an array), isError (a boolean) and structuredContent,
// each at most once, nothing else. It reports false for anything else. The
// content blocks and the structured content are left raw, in raw.
func ToolResult(raw []byte) (content []json.RawMessage, structured json.RawMessage, isError, ok bool) {
	c := Cursor{b: raw}
	c.Space()
	seen := 0
	for more := c.Open(); more; {
		switch c.Member(&seen, "content", "isError", "structuredContent") {
		case 1:
			content, ok = c.Array()
		case 2:
			isError, ok = c.Boolean()
		case 4:
			structured = c.Value()
			ok = structured != nil
		default:
			ok = false
		}
		if more, ok = c.After(ok); !ok {
			return nil, nil, false, false
		}
	}
	if !c.AtEnd() || !json.Valid(raw) {
		return nil, nil, false, false
	}
	return content, structured, isError, true
}

// TextBlock decodes the usual content block, {"type":"text","text":"…"}
// (either order, nothing else), whose text Text decodes, to its text, as
// json.Unmarshal would; false for anything else.
func TextBlock(raw []byte) (string, bool) {
	c := Cursor{b: raw}
	var text string
	seen := 0
	for more := c.Open(); more; {
		var ok bool
		switch c.Member(&seen, "type", "text") {
		case 1:
			ok = c.Literal("text")
		case 2:
			text, ok = c.Text()
		}
		if more, ok = c.After(ok); !ok {
			return "", false
		}
	}
	if seen != 3 || !c.AtEnd() {
		return "", false
	}
	return text, true
}

// answerStart is how most answers begin: these members in this order,
// without spaces.
const (
	answerStart = `{"jsonrpc":"2.0","id":`
	resultKey   = `,"result":`
)

// Answer decodes the usual answer line of a JSON-RPC peer,
//
//	{"jsonrpc":"2.0","id":<id>,"result":<JSON>}
//
// with jsonrpc and id in either order before result, whitespace where JSON
// allows it, an id PlainIDLen accepts, and a trailing line end. It returns
// the id's JSON and the result, both in line, as json.Unmarshal gives them
// to json.RawMessage fields id and result; false for any other line. The
// result is checked once, with json.Valid.
func Answer(line []byte) (id, result []byte, ok bool) {
	c := Cursor{b: line}
	seen := 0
	more := false
	if len(line) > len(answerStart) && string(line[:len(answerStart)]) == answerStart {
		// How servers that encode a Go struct begin (mcp-go's among
		// them): read on from the id.
		c.i, seen = len(answerStart), 3
		if id = c.PlainID(); id == nil {
			return nil, nil, false
		}
		if rest := line[c.i:]; len(rest) > len(resultKey) && string(rest[:len(resultKey)]) == resultKey {
			c.i += len(resultKey)
			result = c.validTail()
			return id, result, result != nil
		}
		if more, ok = c.After(true); !ok {
			return nil, nil, false
		}
	} else {
		more = c.Open()
	}
	for more {
		switch c.Member(&seen, "jsonrpc", "id", "result") {
		case 1:
			ok = c.Literal("2.0")
		case 2:
			id = c.PlainID()
			ok = id != nil
		case 4:
			if seen != 7 {
				return nil, nil, false
			}
			result = c.validTail()
			return id, result, result != nil
		default:
			ok = false
		}
		if more, ok = c.After(ok); !ok {
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// validTail is Tail when it is valid JSON, else nil.
func (c *Cursor) validTail() []byte {
	v := c.Tail()
	if v == nil || !json.Valid(v) {
		return nil
	}
	return v
}
