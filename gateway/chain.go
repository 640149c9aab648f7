package gateway

import (
	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz/shadow"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/ratelimit"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/upstreams"
)

// Links are what the chain's links are built of. Only Execute is
// required: a nil guard lets every call through, a nil Record records
// nothing.
type Links struct {
	Record     *pipeline.Recorder
	Catalog    func() *upstreams.Catalog
	RetrySafe  func(*upstreams.Tool) bool // may the tool be repeated after an unknown outcome
	Arguments  pipeline.ArgumentLimits    // size and nesting caps on arguments; zero: none
	Shadow     *shadow.Guard              // authz.shadow_policy; nil: none
	RateLimits *ratelimit.Guard
	Approvals  *approvals.Guard
	Dedup      *dedup.Guard
	Execute    *pipeline.Executor
	Redact     *redact.Redactor // secrets in results replaced (normalize); nil: none
}

// Chain is the way of every tools/call through the gateway, written once.
// Each link either stops the call with an error code or hands it on; the
// ones marked "wraps" do their work around the rest of the chain. A new
// guard is one package with a Link method, and one line here.
func Chain(opts pipeline.Options, l Links) *pipeline.Chain {
	return pipeline.New(opts,
		l.Record.Link(),                          // wraps: after the call, one log line, one audit record, the metrics
		pipeline.Authenticate(),                  // the principal the transport authenticated (HTTP 401 before any MCP)
		pipeline.Resolve(l.Catalog, l.RetrySafe), // client-facing name -> catalog entry: tool_not_found
		l.Shadow.Link(),                          // a candidate policy beside the live one, never deciding (before authorize: it sees live denials)
		pipeline.Authorize(),                     // Casbin on <server>/<tool>: tool_not_allowed
		pipeline.Validate(l.Arguments),           // argument size and depth caps, the input schema, an override's fixed values: invalid_arguments, tool_changed
		pipeline.Conditions(),                    // policy conditions on the validated arguments: tool_not_allowed
		pipeline.Scopes(),                        // the OAuth scopes scope lines require, on the token: insufficient_scope (HTTP 403)
		l.RateLimits.Link(),                      // token buckets per principal, role, tool: rate_limited
		l.Record.Gate(),                          // audit.fail_closed: a call that cannot be recorded does not run
		l.Approvals.Link(),                       // wraps: a human approves first: approval_required, approval_denied
		l.Dedup.Link(),                           // wraps: identical calls joined or replayed, run once: duplicate_call
		l.Execute.Link(),                         // breaker, deadline, safe retries: tool_timeout, upstream_*, tool_failed
		pipeline.Normalize(l.Redact),             // the envelope, secrets redacted: result_too_large, invalid_result, upstream_error
	)
}
