package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
)

// Approvals makes calls that policy marks (a lines) wait for a human: such
// a call does not run; it answers approval_required naming a request an
// approver can approve or deny. The approval binds to the principal, the
// tool and the exact canonical arguments, and is used up by the one call
// it lets through, once that call is sent upstream: when a later stage
// refuses it before anything is sent, the approval is restored. A nil
// *Approvals requires nothing.
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
// repeat needs a new approval. A call that consumes an approval runs the
// stages after this one itself (as deduplicate does), so that the
// consumption settles with their outcome (settleApproval); its stage time
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
		p.settleApproval(ctx, x, req)
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

// settleApproval settles the consumption of an approval with the call's
// outcome. Consumption happens at the check, atomically, so that replicas
// racing for one approval never both run the call; but a later stage may
// still refuse the call before anything is sent upstream (duplicate
// suppression failing closed, an open breaker, the in-flight limit) or
// answer it from an identical call (joined or replayed). Then nothing was
// run on this approval, and it is restored: the client's retry runs the
// call without a new approval. A call that was sent, or may have been,
// keeps it used. When the restore fails (the store down, the approval
// expired, a newer request for the call), it stays used, and a refusal
// says that a new approval is needed.
func (p *Pipeline) settleApproval(ctx context.Context, x *exchange, used approvals.Request) {
	if !x.sentNothing() {
		x.refusedAfterApproval(false)
		return
	}
	_, err := p.Approvals.Store.Restore(context.WithoutCancel(ctx), used)
	if err != nil && p.Log != nil {
		p.Log.Warn("approval not restored after its call was refused before it was sent; a new approval is needed",
			"approval", used.ID, "tool", x.tool.ID, "err", err)
	}
	x.refusedAfterApproval(err == nil)
}

// sentNothing reports whether this exchange provably sent nothing
// upstream: it made no attempt (refused before execute's attempts, or
// answered by an identical call), or every attempt it made was refused
// before sending. x.outcome is the last attempt's; an earlier attempt that
// was sent is followed by another only for a retry-safe tool, so for one
// of those only a single attempt proves it.
func (x *exchange) sentNothing() bool {
	return x.attempts == 0 || (x.outcome == breaker.NeverSent && (x.attempts == 1 || !x.safe))
}

// refusedAfterApproval rewords the refusal of a call that consumed an
// approval and was then refused before it ran (a later guard failing
// closed, an open breaker, a busy server, an upstream's rate limit). restored says whether the
// approval stands again: then the retry the refusal asks for runs the
// call; else the usual "retry in ..." would only lead to a new
// approval_required, and the message says so instead.
func (x *exchange) refusedAfterApproval(restored bool) {
	if x.approval == "" || x.failed == nil {
		return
	}
	switch x.failed.Code {
	case envelope.RateLimited, envelope.UpstreamUnavailable: // refused, not run
	default:
		return
	}
	if restored {
		e := *x.failed
		e.Message += "; its approval (request " + x.approval +
			") still stands: repeating the call runs it without a new approval"
		x.failed = &e
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
