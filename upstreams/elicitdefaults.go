package upstreams

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Elicitation defaults (SEP-1034, issue 17 item 8; docs/clients.md,
// "Elicitation defaults"). A form an upstream asks for may give each field
// a default, and the client is the one to fill it: a client that shows
// the form shows the defaults filled in, so accepting it unchanged answers
// with them. Toward the upstream, toolgate is that client, and the client
// behind it may accept without a form (a headless agent, a script) and
// leave the fields it did not touch out of its answer. toolgate therefore
// adds, to an accepted answer only, the requested schema's default of
// each field the answer leaves out. It never changes a value the client
// gave, nor a declined or cancelled answer, nor an answer whose content is
// not an object; a default is copied as the upstream wrote it (30 stays an
// integer). It is done here, at the last step before the answer goes
// upstream, so both eras get it: a 2025 session's elicitation/create
// request (answerUpstream) and a 2026-07-28 input_required round (fulfil).

// answerUpstream is onRequest with the defaults of an elicitation form
// added to the client's accepted answer.
func (c *Conn) answerUpstream(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := c.onRequest(ctx, req)
	if err != nil || resp == nil || resp.Error != nil || req.Method != string(mcp.MethodElicitationCreate) {
		return resp, err
	}
	params, mErr := json.Marshal(req.Params)
	if mErr != nil {
		return resp, err
	}
	resp.Result = withElicitationDefaults(params, resp.Result)
	return resp, err
}

// withElicitationDefaults is result (a client's answer to the
// elicitation/create whose params are params) with the requested schema's
// defaults added for the fields an accepted answer leaves out; result
// itself when there is nothing to add or it is not such an answer.
func withElicitationDefaults(params, result json.RawMessage) json.RawMessage {
	var p struct {
		RequestedSchema struct {
			Properties map[string]map[string]json.RawMessage `json:"properties"`
		} `json:"requestedSchema"`
	}
	if json.Unmarshal(params, &p) != nil {
		return result
	}
	defaults := map[string]json.RawMessage{}
	for name, prop := range p.RequestedSchema.Properties {
		if d, ok := prop["default"]; ok && string(d) != "null" {
			defaults[name] = d
		}
	}
	if len(defaults) == 0 {
		return result
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result
	}
	var action string
	if json.Unmarshal(res["action"], &action) != nil || action != "accept" {
		return result
	}
	content := map[string]json.RawMessage{}
	if raw, ok := res["content"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &content) != nil || content == nil {
			return result // not an object: the upstream judges it as the client sent it
		}
	}
	added := false
	for name, d := range defaults {
		if _, given := content[name]; !given {
			content[name] = d
			added = true
		}
	}
	if !added {
		return result
	}
	encoded, err := json.Marshal(content)
	if err != nil {
		return result
	}
	res["content"] = encoded
	out, err := json.Marshal(res)
	if err != nil {
		return result
	}
	return out
}
