package authz

import (
	"fmt"
)

// Enforcer is the first API of this package, kept for callers that have not moved to [Policy]
// and [Store] yet. It is a [Policy] loaded without configured servers; every method answers
// through the Policy.
//
// An Enforcer is never modified after [Load]: a policy change means loading a new one. It is safe
// for concurrent use.
type Enforcer struct {
	p *Policy
}

// Load builds an enforcer from a Casbin model file and a CSV policy file: [LoadPolicy] with no
// configured servers (objects are not checked against mcpServers). Errors are a *[LoadErrors]
// listing every problem, each naming file and line; Load never panics.
func Load(modelPath, policyPath string) (*Enforcer, error) {
	p, err := LoadPolicy(modelPath, policyPath, Options{})
	if err != nil {
		return nil, err
	}
	return &Enforcer{p: p}, nil
}

// Policy is the snapshot behind e.
func (e *Enforcer) Policy() *Policy {
	if e == nil {
		return nil
	}
	return e.p
}

// Decide answers whether principal may perform act ("call") on obj (the canonical
// "<server>/<tool>" catalog ID, never a client-supplied string), knowing nothing of the call's
// arguments: it is [Policy.Decide] with no arguments and no credential roles, so a line whose
// condition reads arguments fails closed (an allow line does not apply, a deny line does).
//
// Unknown principals are denied, as is every request with an empty field. When Casbin fails to
// evaluate, the answer is deny and the cause is returned as internal, for the LOG only: it can
// carry a goroutine stack, so callers must never show it to a client.
func (e *Enforcer) Decide(principal, obj, act string) (allowed bool, internal error) {
	if e == nil || e.p == nil {
		return false, errNoPolicy
	}
	d := e.p.Decide(Request{Subject: Subject{Principal: principal}, Object: obj, Action: act})
	return d.Allowed, d.Internal
}

// Visible filters canonical IDs to those principal could call with some arguments (for
// tools/list filtering; see [Policy.Visible]), in their original order. An ID whose decision
// fails is left out; use [Enforcer.VisibleErr] to log such failures.
func (e *Enforcer) Visible(principal string, objs []string) []string {
	out, _ := e.VisibleErr(principal, objs)
	return out
}

// VisibleErr is [Enforcer.Visible] that also returns the first internal error met (for the log
// only, never for a client), with a count of how many IDs failed.
func (e *Enforcer) VisibleErr(principal string, objs []string) ([]string, error) {
	out := make([]string, 0, len(objs))
	var first error
	failed := 0
	for _, obj := range objs {
		ok, err := e.Policy().visible(Subject{Principal: principal}, obj)
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		if ok {
			out = append(out, obj)
		}
	}
	if first != nil {
		return out, fmt.Errorf("authz: %d of %d decisions failed; first: %w", failed, len(objs), first)
	}
	return out, nil
}

// Version is a short content hash of model+policy (SHA-256 hex, first 12 digits) for logs: two
// enforcers with the same version were loaded from byte-identical files.
func (e *Enforcer) Version() string {
	return e.Policy().Version()
}

// Rules is the number of policy rules (p and g lines) loaded, for logs.
func (e *Enforcer) Rules() int {
	return e.Policy().Rules()
}
