package authz

// ArgsMatter reports whether the answers of [Policy.Decide] and [Policy.ApprovalRule] for s, obj
// and act can depend on the call's arguments: some p or a line whose subject, object and action
// match has a condition that reads the arguments (args.x or a bare argument name). A condition
// that reads only the principal does not count: it is decided by s alone.
//
// When it is false, one decision per subject, object and action holds for every arguments, so a
// caller deciding many recorded calls (package authz/replay) can decide once and reuse the
// answer, and can decide calls whose arguments it does not have. When it is true, the arguments
// are needed, and a caller without them must not guess. Whether a condition reads the
// arguments is known only here, where conditions are compiled; evaluating with empty arguments
// cannot tell ('amount' in args is false without an error).
//
// A principal that is the name of a role is denied whatever the arguments: false.
func (p *Policy) ArgsMatter(s Subject, obj, act string) bool {
	if p == nil || p.se == nil || s.Principal == "" || obj == "" || act == "" || p.IsRole(s.Principal) {
		return false
	}
	c := p.newCtx(Request{Subject: s, Object: obj, Action: act}, false)
	subjects := p.roleClosure(s.Principal)
	subIdx, objIdx, actIdx := p.info.pIndex["sub"], p.info.pIndex["obj"], p.info.pIndex["act"]
	for _, r := range p.prules {
		if r.cond == nil || !r.cond.usesArgs || r.fields[actIdx] != act {
			continue
		}
		if sub := r.fields[subIdx]; !subjects[sub] && !c.cred[sub] {
			continue
		}
		if p.objectMatches(obj, r.fields[objIdx], objIdx) {
			return true
		}
	}
	for _, a := range p.arules {
		if a.cond != nil && a.cond.usesArgs && a.matches(c, subjects) {
			return true
		}
	}
	return false
}
