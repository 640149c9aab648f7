package authz

import (
	"cmp"
	"slices"
)

// What a principal may do with a tool, arguments aside ([Policy.Access]).
const (
	AccessDenied      = "denied"      // no arguments make the call allowed
	AccessConditional = "conditional" // argument conditions decide: some calls may be allowed, some denied
	AccessAllowed     = "allowed"     // allowed whatever the arguments
)

// accessRank orders the accesses from narrowest to widest.
var accessRank = map[string]int{AccessDenied: 0, AccessConditional: 1, AccessAllowed: 2}

// MaxReportPairs bounds the principal/tool pairs [Compare] decides (twice each); past it, the
// access changes are left out and Changes.Truncated says so.
const MaxReportPairs = 20000

// Lines are the policy's rules as written (p, g, a and s lines, each rule once, comments and blank
// lines left out), in file order. They are policy, not secrets.
func (p *Policy) Lines() []string {
	if p == nil {
		return nil
	}
	type numbered struct {
		line int
		text string
	}
	var all []numbered
	for _, r := range p.byKey {
		all = append(all, numbered{r.line, r.text})
	}
	for _, a := range p.arules {
		all = append(all, numbered{a.line, a.text})
	}
	for _, s := range p.srules {
		all = append(all, numbered{s.line, s.text})
	}
	slices.SortFunc(all, func(a, b numbered) int { return cmp.Compare(a.line, b.line) })
	out := make([]string, len(all))
	for i, n := range all {
		out[i] = n.text
	}
	return out
}

// ruleKeys maps each rule's identity (its type and fields, the condition included: spacing and
// position aside) to its text, as [Policy.Lines] lists them.
func (p *Policy) ruleKeys() map[string]string {
	out := map[string]string{}
	for k, r := range p.byKey {
		out[k] = r.text
	}
	for _, a := range p.arules {
		cond := ""
		if a.cond != nil {
			cond = a.cond.text
		}
		out[ruleKey(approvalType, []string{a.sub, a.obj, a.act, cond})] = a.text
	}
	for _, s := range p.srules {
		out[ruleKey(scopeType, []string{s.obj, s.act, s.scope})] = s.text
	}
	return out
}

// KnownPrincipals are the principals the policy knows, sorted: the configured ones it was built
// with (Options.Principals) and every name on the left of a g line or the subject of a p or a
// line that is not a role ([Policy.IsRole]).
func (p *Policy) KnownPrincipals() []string {
	if p == nil {
		return nil
	}
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !p.IsRole(n) {
			seen[n] = true
		}
	}
	for _, n := range p.principals {
		add(n)
	}
	for _, e := range p.gEdges {
		add(e.member)
	}
	for s := range p.subjects {
		add(s)
	}
	for _, a := range p.arules {
		add(a.sub)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Access is what principal (with the roles its g lines give, and no credential roles or
// attributes) may do with the tool obj: [AccessAllowed] or [AccessDenied] when no line with a
// condition can match the call (the answer is then [Policy.Decide]'s, whatever the arguments),
// [AccessDenied] when no arguments can make it allowed ([Policy.Visible] is false), and
// [AccessConditional] when arguments decide.
func (p *Policy) Access(principal, obj string) string {
	if p == nil || p.se == nil {
		return AccessDenied
	}
	s := Subject{Principal: principal}
	if ok, err := p.visibleUncached(s, obj, ActCall); err != nil || !ok {
		return AccessDenied
	}
	if !p.conditionMayApply(obj, ActCall) {
		if p.decide(Request{Subject: s, Object: obj, Action: ActCall}).Allowed {
			return AccessAllowed
		}
		return AccessDenied
	}
	t, err := p.Trace(Request{Subject: s, Object: obj, Action: ActCall})
	if err != nil {
		return AccessDenied
	}
	var allow, condAllow, condDeny bool
	for _, l := range t.Lines {
		switch {
		case l.Effect == effectDeny && l.Condition == "":
			return AccessDenied
		case l.Effect == effectDeny:
			condDeny = true
		case l.Condition == "":
			allow = true
		default:
			condAllow = true
		}
	}
	switch {
	case allow && !condDeny:
		return AccessAllowed
	case allow || condAllow:
		return AccessConditional
	}
	return AccessDenied
}

// AccessChange is one principal/tool pair whose access a policy change widens or narrows.
type AccessChange struct {
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Before    string `json:"before"` // an Access* value
	After     string `json:"after"`
}

// Changes are what a policy change changes: its rules and who may call what.
type Changes struct {
	Added   []string // lines of the new policy without a rule of the same fields in the old, in file order
	Removed []string // lines of the old policy without a rule of the same fields in the new, in file order
	// Gained are the pairs whose access widens (denied -> conditional -> allowed), Lost those it
	// narrows, each sorted by principal then tool. Two conditional accesses count as unchanged:
	// telling them apart needs the arguments.
	Gained, Lost []AccessChange
	// Truncated: there were more than MaxReportPairs principal/tool pairs, so Gained and Lost
	// were not computed.
	Truncated bool
}

// Compare lists what changes from old to next: the lines added and removed (moving a line changes
// nothing; editing one removes it and adds its new text), and, for every principal either policy
// knows ([Policy.KnownPrincipals]) and every tool of tools (canonical IDs, the catalog's), the
// access before and after where they differ ([Policy.Access]).
func Compare(old, next *Policy, tools []string) Changes {
	var c Changes
	oldKeys, nextKeys := old.ruleKeys(), next.ruleKeys()
	c.Added = linesWithout(next, nextKeys, oldKeys)
	c.Removed = linesWithout(old, oldKeys, nextKeys)

	principals := slices.Concat(old.KnownPrincipals(), next.KnownPrincipals())
	slices.Sort(principals)
	principals = slices.Compact(principals)
	if len(principals)*len(tools) > MaxReportPairs {
		c.Truncated = true
		return c
	}
	tools = slices.Sorted(slices.Values(tools))
	for _, pr := range principals {
		for _, tool := range tools {
			before, after := old.Access(pr, tool), next.Access(pr, tool)
			switch ch := (AccessChange{Principal: pr, Tool: tool, Before: before, After: after}); {
			case accessRank[after] > accessRank[before]:
				c.Gained = append(c.Gained, ch)
			case accessRank[after] < accessRank[before]:
				c.Lost = append(c.Lost, ch)
			}
		}
	}
	return c
}

// linesWithout are p's lines, in file order, whose rule other has not.
func linesWithout(p *Policy, own, other map[string]string) []string {
	if p == nil {
		return nil
	}
	missing := map[string]bool{}
	for k, text := range own {
		if _, ok := other[k]; !ok {
			missing[text] = true
		}
	}
	var out []string
	for _, l := range p.Lines() {
		if missing[l] {
			out = append(out, l)
			delete(missing, l)
		}
	}
	return out
}
