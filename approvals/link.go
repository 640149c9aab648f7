package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"log/slog"
	"time"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/sanitize"
)

// Guard makes calls that policy marks (a lines) wait for a human: such a
// call does not run; it answers approval_required naming a request an
// approver can approve or deny. The approval binds to the principal, the
// tool, the exact canonical arguments and the version of the a line that
// held the call (so an edited rule asks again), and is used up by the one call
// it lets through, once that call is sent upstream: when a later link
// refuses it before anything is sent, the approval is restored. A nil
// *Guard, or one without a Store, requires nothing.
type Guard struct {
	// Store keeps the requests: the approvals file, or Redis shared by
	// replicas (then an approval given through any replica is consumed
	// through any other, once).
	Store Store
	Log   *slog.Logger
	// Rules settle, per held tool, how long its requests live (the first
	// rule matching the tool; without one, the store's ttl).
	Rules Rules
	// OnCreated, optional, is told of each request created here, with
	// the index in Rules of the rule that applies (-1: none). It must
	// not block: the call waits for it (webhooks queue their deliveries).
	OnCreated func(req Request, rule int)
}

// sharedDownWait is the retry hint while the shared store cannot be
// reached: about as long as its health check takes to notice it is back.
const sharedDownWait = time.Second

// Link is the approval guard's place in the chain: after the policy
// allowed the call and before duplicate suppression, so an approved call
// runs once and its repeat needs a new approval. A call that consumes an
// approval runs the rest of the chain inside this link, so that the
// consumption settles with its outcome (settle).
func (g *Guard) Link() pipeline.Link { return pipeline.Link{Name: "approve", Wrap: g.approve} }

// approve asks the call's policy snapshot (the one it was authorized by)
// whether the call needs an approval, and if so whether it has one.
func (g *Guard) approve(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
	if g == nil || g.Store == nil {
		return x.Pass(next)
	}
	rule, needed := x.Policy.ApprovalRule(authz.Request{Subject: x.Call.Subject, Object: x.Tool.ID, Action: authz.ActCall, Args: x.Call.Args})
	if !needed {
		return x.Pass(next)
	}
	canonical, err := x.CanonicalArgs()
	if err != nil {
		return envelope.Errorf(envelope.InvalidArguments, "arguments could not be put in canonical form for approval").WithDetail(err.Error())
	}
	sum := sha256.Sum256(canonical)
	call := Call{Principal: x.Call.Subject.Principal, Tool: x.Tool.ID, ArgsHash: hex.EncodeToString(sum[:]), Args: canonical,
		Rule: rule, RuleDigest: x.Policy.ApprovalDigest(rule), PolicyVersion: x.Policy.Version()}
	ruleIndex := g.Rules.For(x.Tool.ID)
	if ruleIndex >= 0 {
		call.TTL = g.Rules[ruleIndex].TTL
	}
	outcome, req, err := g.Store.Check(ctx, call)
	if err == nil && req.Created && g.OnCreated != nil {
		g.OnCreated(req, ruleIndex)
	}
	switch {
	case errors.Is(err, ErrUnavailable):
		// Always closed: running a call that needs an approval because
		// the approvals cannot be read would be a bypass. rate_limited is
		// the retryable "refused for now, before it ran" code, as for
		// duplicate suppression and rate limits when their store is down.
		return envelope.Errorf(envelope.RateLimited,
			"this call needs an approval, which cannot be checked because the shared state store is unavailable, so the call was not run; retry in %s",
			sharedDownWait).WithDetail("approval rule " + rule + ": " + err.Error())
	case err != nil:
		return envelope.Errorf(envelope.InternalError, "the approval store failed; the call was not run").WithDetail(err.Error())
	case outcome == Proceed:
		x.Approval = req.ID
		next(ctx, x)
		g.settle(ctx, x, req)
		return x.Failed
	case outcome == Denied:
		msg := "an approver denied this call (request " + req.ID + ")"
		if req.Reason != "" {
			msg += ": " + sanitize.Clip(sanitize.Text(req.Reason), 300)
		}
		return (&envelope.Error{Code: envelope.ApprovalDenied, Message: msg}).WithDetail("approval rule " + rule)
	}
	return envelope.Errorf(envelope.ApprovalRequired,
		"%sthis call needs a human approval first: request %s for %s with arguments %s awaits an approver "+
			"until %s (toolgate approvals approve %s); repeat exactly the same call once it is approved",
		lapsedNote(req.Lapsed), req.ID, x.Tool.Name, sanitize.Clip(string(canonical), 300), req.ExpiresAt.UTC().Format(time.RFC3339), req.ID).WithDetail("approval rule " + rule)
}

// lapsedNote says why an agent repeating a call is asked again: the earlier request for it expired.
func lapsedNote(prev *Request) string {
	switch {
	case prev == nil:
		return ""
	case prev.DecidedBy != "":
		return "the approval of this call (request " + prev.ID + ") expired unused at " + prev.ExpiresAt.UTC().Format(time.RFC3339) + "; "
	}
	return "the earlier request for this call (" + prev.ID + ") expired without a decision at " + prev.ExpiresAt.UTC().Format(time.RFC3339) + "; "
}

// settle settles the consumption of an approval with the call's
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
func (g *Guard) settle(ctx context.Context, x *pipeline.Exchange, used Request) {
	if !x.SentNothing() {
		refusedAfterApproval(x, false)
		return
	}
	_, err := g.Store.Restore(context.WithoutCancel(ctx), used)
	if err != nil && g.Log != nil {
		g.Log.Warn("approval not restored after its call was refused before it was sent; a new approval is needed",
			"approval", used.ID, "tool", x.Tool.ID, "err", err)
	}
	refusedAfterApproval(x, err == nil)
}

// refusedAfterApproval rewords the refusal of a call that consumed an
// approval and was then refused before it ran (a later guard failing
// closed, an open breaker, a busy server, an upstream's rate limit). restored says whether the
// approval stands again: then the retry the refusal asks for runs the
// call; else the usual "retry in ..." would only lead to a new
// approval_required, and the message says so instead.
func refusedAfterApproval(x *pipeline.Exchange, restored bool) {
	if x.Approval == "" || x.Failed == nil {
		return
	}
	switch x.Failed.Code {
	case envelope.RateLimited, envelope.UpstreamUnavailable: // refused, not run
	default:
		return
	}
	if restored {
		e := *x.Failed
		e.Message += "; its approval (request " + x.Approval +
			") still stands: repeating the call runs it without a new approval"
		x.Failed = &e
		return
	}
	why, _, _ := strings.Cut(x.Failed.Message, "; ")
	detail := "refused after the approval was used: " + x.Failed.Message
	if x.Failed.Detail != "" {
		detail += " (" + x.Failed.Detail + ")"
	}
	x.Failed = (&envelope.Error{Code: x.Failed.Code,
		Message: why + "; the call was not run, but it used up its approval (request " + x.Approval +
			"), so running it needs a new approval: repeating it asks for one"}).WithDetail(detail)
}
