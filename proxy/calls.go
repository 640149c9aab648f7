package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/toolsets"
	"github.com/toolgate/toolgate/upstreams"
)

// Call is a tools/call as the chain takes it.
type Call = pipeline.Call

// Calls runs tools/calls: the chain (pipeline.Chain).
type Calls interface {
	Handle(ctx context.Context, call pipeline.Call) *mcp.CallToolResult
}

var _ Calls = (*pipeline.Chain)(nil)

// Policy is what the server asks of the policy outside tools/call: which
// tools, resources and prompts a caller may see, and decisions on the
// requests it relays (resources/read, prompts/get, completions).
type Policy interface {
	Visible(s authz.Subject, obj string) bool
	VisibleAct(s authz.Subject, obj, act string) bool
	Decide(req authz.Request) authz.Decision
	RolesOf(s authz.Subject) []string // for the toolset rules that name a role
	CheckScopes(req authz.Request) authz.ScopeCheck
}

var _ Policy = (*authz.Policy)(nil)

// Options are the server's dependencies. Calls, Catalog and Policy are
// required; Metrics may be nil.
type Options struct {
	Calls   Calls
	Catalog func() *upstreams.Catalog // the current catalog snapshot
	Policy  func() Policy             // the policy in force, read once per request
	Metrics *metrics.Metrics          // counts relayed requests
	// Toolsets picks each request's toolset (toolset_rules); nil: none,
	// every client sees every tool the policy allows.
	Toolsets *toolsets.Selector
	// NoStdioFastPath sends every line of a stdio client through mcp-go's
	// stdio server, including the tools/calls the fast path would answer
	// (see stdioFast): listen.fast_path: false.
	NoStdioFastPath bool
	// Redact replaces secrets in what upstreams send outside tools/call
	// results (resource contents, prompts, their errors, and the log
	// notifications and progress messages relayed during a call); nil
	// redacts nothing. (A tools/call's result is redacted in the chain.)
	Redact *redact.Redactor
}
