// Package proxy is the Tool Execution Layer: the MCP server that clients
// talk to, and the pipeline every tools/call passes before, while and after
// an upstream runs it.
//
// The order of the stages lives in one place, Pipeline.stages. Each stage is
// a small method in its own file that reads the inbound Call (never
// modifying it) and either records what it learned on the exchange or stops
// the call with an *envelope.Error. Later guards (rate limits, approvals,
// duplicate suppression) are further entries in that list.
package proxy
