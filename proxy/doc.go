// Package proxy is the MCP server clients talk to: it speaks MCP over
// stdio and Streamable HTTP (with a fast path for plain tools/calls), lists
// the tools a caller may call, hands every tools/call to the chain
// (pipeline.Chain), and relays what is not a tool call (resources,
// prompts, completions, logging, and the upstreams' requests to the client:
// sampling, elicitation, roots) under the same policy.
//
// It knows nothing of how a call is decided: that is the chain's, whose
// order gateway/chain.go writes down.
package proxy
