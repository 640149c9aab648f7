// Package discovery serves large catalogs to models without listing them:
// a client whose toolset asks for discovery (package toolsets) is listed
// two meta-tools instead of the catalog, one that searches the tools it
// may use by words and one that calls a tool by name. The search ranks
// with BM25 over each tool's name, title, description and parameter
// names; the call is handed to the chain exactly as a direct call of that
// tool, so policy, validation, guards and the audit trail treat it as one.
//
// Why two meta-tools, why BM25 and why these weights: docs/design.md,
// "Toolsets and discovery".
package discovery

// The meta-tools' client-facing names. The catalog refuses an upstream
// tool that would claim either (upstreams.ReservedToolNames).
const (
	SearchTool = "toolgate__search_tools"
	CallTool   = "toolgate__call_tool"
)
