package pipeline

import (
	"github.com/toolgate/toolgate/authz"
)

// Policy decides who may call what: one version of the policy, which a
// call is decided by from its first link to its last. Every capability a
// link needs is a method here, so that a policy missing one fails to
// compile rather than silently skipping a link's check. A Decision's
// Internal error is for the log only: it may carry stacks or file paths.
type Policy interface {
	// Visible reports whether some line lets s call obj at all,
	// conditions aside (authorize).
	Visible(s authz.Subject, obj string) bool
	// Decide is the full decision, argument conditions included
	// (conditions).
	Decide(req authz.Request) authz.Decision
	// RolesOf are the roles s holds (rate limits per role).
	RolesOf(s authz.Subject) []string
	// ApprovalRule says whether the call needs a human approval, and
	// which line demands it (approve).
	ApprovalRule(req authz.Request) (rule string, needed bool)
	// ApprovalDigest is the version of the approval line a rule names,
	// which the approval is bound to (approve).
	ApprovalDigest(rule string) string
	// CheckScopes says which OAuth scopes the call needs and which
	// of them the caller's token lacks (scopes).
	CheckScopes(req authz.Request) authz.ScopeCheck
	// Version identifies this policy in the audit trail.
	Version() string
}

// The policy the gateway loads is a Policy; its hot-reloading store hands
// out one (Current) per call.
var _ Policy = (*authz.Policy)(nil)

// DenyAll is the policy of a chain built without one: nothing is allowed.
type DenyAll struct{}

var _ Policy = DenyAll{}

func (DenyAll) Visible(authz.Subject, string) bool         { return false }
func (DenyAll) Decide(authz.Request) authz.Decision        { return authz.Decision{} }
func (DenyAll) RolesOf(authz.Subject) []string             { return nil }
func (DenyAll) ApprovalRule(authz.Request) (string, bool)  { return "", false }
func (DenyAll) ApprovalDigest(string) string               { return "" }
func (DenyAll) Version() string                            { return "" }
func (DenyAll) CheckScopes(authz.Request) authz.ScopeCheck { return authz.ScopeCheck{} }
