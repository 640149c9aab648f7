package conformanceserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The 0.2.0-alpha suite's server-stateless scenario (protocol 2026-07-28) probes three
// requirements through tools it calls by name. Without them each check fails directly as
// untestable, and through a gateway that answers an unknown tool with a tool_not_found result
// the suite would believe the tool ran and pass vacuously.
//
//	test_logging_tool           logs at info while it runs, but only at the level the request asked
//	                            for in _meta: a request without one gets no notifications/message
//	test_streaming_elicitation  asks the user a question: from 2026-07-28 as an input_required
//	                            result on the call's stream, never an elicitation/create request
//	test_missing_capability     needs the client's sampling: a 2026-07-28 request whose
//	                            clientCapabilities lack it is refused with -32021 (HTTP 400)
//	                            before any handler runs (see refuseMissingCapability)
func addProbeTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("test_logging_tool",
		mcp.WithDescription("Sends three info log notifications at the level the request asked for, then answers")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return logSteps(ctx, s)
		})
	s.AddTool(mcp.NewTool("test_streaming_elicitation",
		mcp.WithDescription("Asks the user for their name (elicitation), then reports the answer")),
		elicit("Elicitation completed: ", constRequest("What is your name?", nameSchema)))
	s.AddTool(mcp.NewTool(missingCapabilityTool,
		mcp.WithDescription("Needs the client's sampling capability: asks its LLM to say hello"),
		mcp.WithString("prompt", mcp.DefaultString("Say hello"), mcp.Description("The prompt to send to the LLM"))),
		sampleDefaultPrompt)
}

const missingCapabilityTool = "test_missing_capability"

// sampleDefaultPrompt is sample with the prompt optional.
func sampleDefaultPrompt(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	if _, ok := args["prompt"]; !ok {
		req.Params.Arguments = map[string]any{"prompt": "Say hello"}
	}
	return sample(ctx, req)
}

// requiredCapabilities names, per tool, the client capability the tool cannot run without.
var requiredCapabilities = map[string]string{missingCapabilityTool: "sampling"}

// refuseMissingCapability returns the error answer for msg, a JSON-RPC request, when it is a
// 2026-07-28 tools/call of a tool whose required client capability the request's _meta does
// not declare; nil otherwise. mcp-go maps every handler error to -32603 and has no way for a
// tool to require a capability, so the transports ask this before handing a message to
// mcp-go. error.data.requiredCapabilities is a ClientCapabilities object ({"sampling": {}}),
// as the schema defines it.
func refuseMissingCapability(msg []byte) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string    `json:"name"`
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || req.Method != string(mcp.MethodToolsCall) || len(req.ID) == 0 {
		return nil
	}
	capability, ok := requiredCapabilities[req.Params.Name]
	meta := req.Params.Meta
	if !ok || !mcp.IsModernProtocol(meta.ProtocolVersion()) {
		return nil
	}
	caps := meta.ClientCapabilities()
	if caps == nil || declares(*caps, capability) {
		return nil // a malformed _meta is mcp-go's to refuse (-32602)
	}
	out, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      req.ID,
		"error": map[string]any{
			"code":    mcp.MISSING_REQUIRED_CLIENT_CAPABILITY,
			"message": mcp.MissingRequiredClientCapabilityError{Capability: capability}.Error(),
			"data":    map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}},
		},
	})
	return out
}

func declares(c mcp.ClientCapabilities, capability string) bool {
	switch capability {
	case "sampling":
		return c.Sampling != nil
	case "elicitation":
		return c.Elicitation != nil
	case "roots":
		return c.Roots != nil
	}
	return false
}

// capabilityGate answers over HTTP, with 400 as 2026-07-28 prescribes for -32021, the POSTs
// refuseMissingCapability refuses, and hands every other request on with its body intact.
func capabilityGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// mcp-go's own answer to a body over maxRequestBody, status and words.
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if refusal := refuseMissingCapability(body); refusal != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(refusal)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// capabilityGateReader is stdin for the stdio server: the lines refuseMissingCapability refuses
// are answered on out instead of reaching mcp-go.
type capabilityGateReader struct {
	in      *bufio.Reader
	out     io.Writer
	pending []byte
}

func newCapabilityGateReader(in io.Reader, out io.Writer) *capabilityGateReader {
	return &capabilityGateReader{in: bufio.NewReader(in), out: out}
}

func (g *capabilityGateReader) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.in.ReadBytes('\n')
		if refusal := refuseMissingCapability(line); refusal != nil {
			if _, werr := g.out.Write(append(refusal, '\n')); werr != nil {
				return 0, werr
			}
			line = nil
		}
		g.pending = line
		if err != nil && len(g.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}
