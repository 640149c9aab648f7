// Package upstreams holds the gateway's side as an MCP client: one
// connection per configured upstream server (stdio child process,
// Streamable HTTP or legacy SSE), and the tool catalog built from what those
// servers list.
//
// Upstreams are untrusted. Every byte they send passes a size cap while it
// is read (capReader); schemas are kept raw and checked by package
// toolschema before anything compiles them; a stdio child gets an
// allowlisted environment, never the gateway's own; and the client's
// credential is never sent upstream (connections are built only from
// config).
//
// tools/list and tools/call are sent as raw JSON-RPC through the mcp-go
// transport rather than through mcp-go's typed client: the typed client
// drops schema keywords, decodes numbers as float64 and fails a whole call
// on an unknown content type (see shared/notes/mcp-go.md).
package upstreams
