// Package toolsets is presentation, not access control: a toolset is a
// named set of tools (patterns over the canonical <server>/<tool>), and
// rules pick one per request from who is calling (principal, role) and
// what the client says of itself (an HTTP header, the initialize
// clientInfo name). A client then sees, and can call, only the tools of
// its toolset that the policy allows, so a coding IDE and a support agent
// of one principal get different subsets without policy lines written
// for presentation. A toolset never widens what the policy allows.
//
// A toolset may ask for discovery: its clients are listed two meta-tools
// (search the catalog, call a tool by name) instead of the tools
// themselves (package discovery).
//
// Why a tool outside the selected toolset answers tool_not_found rather
// than tool_not_allowed, and why rules are first-match: docs/design.md,
// "Toolsets and discovery".
package toolsets
