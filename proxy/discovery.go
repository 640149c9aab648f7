package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// A client whose toolset asks for discovery is listed discovery's two
// meta-tools instead of its tools (filterList). The search is answered
// here, from the catalog and the policy, and runs nothing; the call is
// unwrapped where every call is built (callFrom), and then is, for the
// chain, a direct call of the tool it names: the same links, the same
// envelope, the same audit record. Both meta-tools are registered for
// every client; for a client without discovery they answer tool_not_found
// as a name the catalog does not have would (the catalog refuses an
// upstream tool by either name).

// metaTools are the meta-tools as registered with mcp-go.
func (s *Server) metaTools() []server.ServerTool {
	tools := discovery.Tools()
	return []server.ServerTool{{Tool: tools[0], Handler: s.search}, {Tool: tools[1], Handler: s.handle}}
}

// search answers the search meta-tool.
func (s *Server) search(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	set := s.toolsetOf(ctx, req.Params.Meta)
	if !set.Discovers() {
		return s.handle(ctx, req) // the chain answers tool_not_found
	}
	query, limit, bad := discovery.ParseSearch(req.Params.RawArguments)
	if bad != nil {
		s.opts.Metrics.ToolSearch(set.Label(), metrics.SearchInvalid)
		return pipeline.FailureResult(bad, false, false), nil
	}
	subject, policy := SubjectFrom(ctx), s.opts.Policy()
	visible := func(t *upstreams.Tool) bool { return set.Has(t.ID) && policy.Visible(subject, t.ID) }
	hits := s.searches.For(s.opts.Catalog()).Search(query, discovery.Keep(visible), limit)
	s.log.Debug("tool search", "principal", subject.Principal, "toolset", set.Label(), "found", len(hits))
	result := metrics.SearchFound
	if len(hits) == 0 {
		result = metrics.SearchEmpty
	}
	s.opts.Metrics.ToolSearch(set.Label(), result)
	data := pipeline.MustJSON(discovery.SearchData(hits))
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(data))},
		StructuredContent: envelope.Encode(envelope.Success(data)),
	}, nil
}

// unwrapDiscoveryCall makes a call of the call meta-tool, by a client
// whose toolset asks for discovery, the call of the tool it names with
// the arguments it gives (their exact bytes); arguments it cannot read
// leave the call refused with invalid_arguments, which the chain answers
// and records.
func unwrapDiscoveryCall(call *Call) {
	if call.Name != discovery.CallTool || !call.Toolset.Discovers() {
		return
	}
	name, args, bad := discovery.ParseCall(call.Args)
	if bad != nil {
		call.Refused = bad
		return
	}
	call.Name, call.Args = name, args
}
