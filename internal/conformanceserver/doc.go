// Package conformanceserver is the MCP server that the official conformance suite
// (npm @modelcontextprotocol/conformance, server scenarios) expects to find upstream: it offers
// exactly the tools, resources, prompts and behaviours those scenarios check, so that the suite
// can run against it directly and, in tests and CI, through toolgate in front of it.
//
// The names it serves are fixed by the suite (test_simple_text, test://static-text,
// test_simple_prompt, ...); see New for the full list. Serve it with Main (stdio, or Streamable
// HTTP at /mcp with -http) or in-process with NewHTTPHandler.
package conformanceserver
