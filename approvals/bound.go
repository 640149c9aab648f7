package approvals

import (
	"errors"
	"fmt"
)

// ErrRuleGone refuses a decision on a request whose rule is no longer in the policy in force: the
// a line that held the call was edited or removed since (its digest is no longer any line's). The
// request stays pending until it expires; if the call still needs an approval, the agent's repeat
// is held under the rule in force, as a new request.
var ErrRuleGone = errors.New("the policy no longer has the rule that held this call")

// RuleFinder is what Bound asks the policy in force: the a line with a digest, if it still has one
// (authz's *Policy).
type RuleFinder interface {
	ApprovalByDigest(digest string) (ref, text string, ok bool)
}

// Bound is s whose Approve and Deny first check that the policy in force (policy(), nil: none)
// still holds the request's call under the rule it was held by, and refuse with ErrRuleGone when it
// does not: an approver's decision is bound to the rule's version, as the call's consumption is (Check).
// The admin API, `toolgate approvals` and the console all decide through it.
//
// The check and the decision are two steps: a policy swapped between them lets the decision through,
// and the approval is then refused where it matters, when the repeated call is held under the new
// rule (another digest) and so does not find it.
func Bound(s Store, policy func() RuleFinder) Store {
	return &bound{Store: s, policy: policy}
}

type bound struct {
	Store
	policy func() RuleFinder
}

func (b *bound) Approve(id, by string) (Request, error) {
	if err := b.check(id); err != nil {
		return Request{}, err
	}
	return b.Store.Approve(id, by)
}

func (b *bound) Deny(id, by, reason string) (Request, error) {
	if err := b.check(id); err != nil {
		return Request{}, err
	}
	return b.Store.Deny(id, by, reason)
}

func (b *bound) check(id string) error {
	req, err := b.Store.Get(id)
	if err != nil {
		return err
	}
	if req.State != StatePending {
		return nil // the store refuses it with the right error
	}
	return RuleInForce(req, b.policy())
}

// RuleInForce is nil when pol still has the a line req was held under (by its digest), else an
// error wrapping ErrRuleGone that names the rule.
func RuleInForce(req Request, pol RuleFinder) error {
	if pol != nil && req.RuleDigest != "" {
		if _, _, ok := pol.ApprovalByDigest(req.RuleDigest); ok {
			return nil
		}
	}
	return fmt.Errorf("%w (%s, version %s); nothing was decided", ErrRuleGone, req.Rule, ruleVersion(req.RuleDigest))
}

func ruleVersion(d string) string {
	if d == "" {
		return "not recorded"
	}
	return d
}
