// Package upstreams holds the gateway's side as an MCP client: one
// connection per configured upstream server (stdio child process,
// Streamable HTTP or legacy SSE), and the tool catalog built from what those
// servers list.
//
// Upstreams are untrusted. Every byte they send passes a size cap while it
// is read (capReader); schemas are kept raw and checked by package
// toolschema before anything compiles them; a stdio child gets an
// allowlisted environment, never the gateway's own; and the client's
// credential is never sent upstream (connections are built only from the
// Server settings).
//
// upstreams does not read the gateway's config: Start, Build and Dial take
// a Server per upstream (server.go), which gateway.UpstreamServers makes
// from the config with its defaults applied. A zero limit in a Server means
// none (see Server for why the defaults are not repeated here).
//
// Every enabled server has a supervisor goroutine (supervise.go) owned by
// the Set: it connects, lists the tools, re-lists them when the upstream
// sends notifications/tools/list_changed (debounced, never on the
// transport's read loop), and when the connection goes down (a stdio child
// exited or its output ended, an HTTP session ended or the server cannot be
// reached, an SSE stream dropped) connects again with exponential backoff,
// logging a dead child's exit status and stderr tail. Meanwhile the
// server's last known tools stay in the catalog and their calls fail at
// once as NotSent. Close stops every supervisor and child process.
//
// tools/list and tools/call are sent as raw JSON-RPC through the transport
// (mcp-go's for HTTP and SSE; over stdio lineTransport, which costs less
// per call) rather than through mcp-go's typed client: the typed client
// drops schema keywords, decodes numbers as float64 and fails a whole call
// on an unknown content type (see docs/design.md, mcp-go behaviours we rely
// on or work around).
package upstreams
