package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
)

// Approvals makes calls that policy marks (a lines) wait for a human: such
// a call does not run; it answers approval_required naming a request an
// approver can approve or deny. The approval binds to the principal, the
// tool and the exact canonical arguments, and is used up by the one call
// it lets through. A nil *Approvals requires nothing.
type Approvals struct {
	// Store keeps the requests: the approvals file, or Redis shared by
	// replicas (then an approval given through any replica is consumed
	// through any other, once).
	Store approvals.Store
	// Rules is used when the call's policy snapshot has no approval rules
	// of its own (authz.Policy has them).
	Rules approvalRules
}

type approvalRules interface {
	ApprovalRule(authz.Request) (rule string, needed bool)
}

// approve is the approval guard. It runs after the policy allowed the call
// and before duplicate suppression, so an approved call runs once and its
// repeat needs a new approval. A call that uses up an approval runs the
// stages after this one itself (as deduplicate does), so that a refusal
// from them can say the approval is spent (spentApproval); its stage time
// then includes theirs.
func (p *Pipeline) approve(ctx context.Context, x *exchange) *envelope.Error {
	a := p.Approvals
	if a == nil || a.Store == nil {
		return nil
	}
	rules := a.Rules
	if own, ok := x.policy.(approvalRules); ok {
		rules = own // the same policy snapshot the call was authorized by
	}
	if rules == nil {
		return nil
	}
	rule, needed := rules.ApprovalRule(authz.Request{Subject: x.call.Subject, Object: x.tool.ID, Action: authz.ActCall, Args: x.call.Args})
	if !needed {
		return nil
	}
	canonical, err := x.canonicalArgs()
	if err != nil {
		return envelope.Errorf(envelope.InvalidArguments, "arguments could not be put in canonical form for approval").WithDetail(err.Error())
	}
	sum := sha256.Sum256(canonical)
	outcome, req, err := a.Store.Check(ctx, x.call.Subject.Principal, x.tool.ID, hex.EncodeToString(sum[:]), canonical, rule)
	switch {
	case errors.Is(err, approvals.ErrUnavailable):
		// Always closed: running a call that needs an approval because
		// the approvals cannot be read would be a bypass. rate_limited is
		// the retryable "refused for now, before it ran" code, as for
		// duplicate suppression and rate limits when their store is down.
		return envelope.Errorf(envelope.RateLimited,
			"this call needs an approval, which cannot be checked because the shared state store is unavailable, so the call was not run; retry in %s",
			sharedDownWait).WithDetail("approval rule " + rule + ": " + err.Error())
	case err != nil:
		return envelope.Errorf(envelope.InternalError, "the approval store failed; the call was not run").WithDetail(err.Error())
	case outcome == approvals.Proceed:
		x.approval = req.ID
		p.runStages(ctx, x, stageAfter("approve"))
		x.finished = true
		x.spentApproval()
		return nil
	case outcome == approvals.Denied:
		msg := "an approver denied this call (request " + req.ID + ")"
		if req.Reason != "" {
			msg += ": " + sanitize.Clip(sanitize.Text(req.Reason), 300)
		}
		return (&envelope.Error{Code: envelope.ApprovalDenied, Message: msg}).WithDetail("approval rule " + rule)
	}
	return envelope.Errorf(envelope.ApprovalRequired,
		"this call needs a human approval first: request %s for %s with arguments %s awaits an approver "+
			"(toolgate approvals approve %s); repeat exactly the same call once it is approved",
		req.ID, x.tool.Name, sanitize.Clip(string(canonical), 300), req.ID).WithDetail("approval rule " + rule)
}

// stageAfter is the index of the stage after the one named name.
func stageAfter(name string) int {
	for i, st := range stages {
		if st.name == name {
			return i + 1
		}
	}
	panic("proxy: no stage " + name)
}

// spentApproval rewords the refusal of a call that used up an approval
// and was then refused before it ran (a later guard failing closed, an
// open breaker, a busy server): the approval is consumed when it is
// checked, so the usual "retry in ..." would only lead to a new
// approval_required. The message says so instead. (Restoring the approval
// would need every approvals.Store to support it; this is the minimal fix.)
func (x *exchange) spentApproval() {
	if x.approval == "" || x.failed == nil {
		return
	}
	switch x.failed.Code {
	case envelope.RateLimited, envelope.UpstreamUnavailable: // refused, not run
	default:
		return
	}
	why, _, _ := strings.Cut(x.failed.Message, "; ")
	detail := "refused after the approval was used: " + x.failed.Message
	if x.failed.Detail != "" {
		detail += " (" + x.failed.Detail + ")"
	}
	x.failed = (&envelope.Error{Code: x.failed.Code,
		Message: why + "; the call was not run, but it used up its approval (request " + x.approval +
			"), so running it needs a new approval: repeating it asks for one"}).WithDetail(detail)
}
