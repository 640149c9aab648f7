package authz

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/casbin/casbin/v2/util"
)

// approvalType is the line type of an approval rule in the policy file:
//
//	a, <role or principal>, <server>/<tool>, call[, <condition>]
//
// "this subject's call of this tool (under this condition) needs a human approval". Casbin never
// sees these lines (its loader refuses a section the model does not define, and an approval is
// not an effect that deny-override could combine): [LoadPolicy] diverts them from the lines it
// hands to Casbin's adapter, lints them like p lines and evaluates them here, with the same role
// resolution, object match, action match and strict conditions as p lines.
const approvalType = "a"

// approvalNames are the fields of an a line after the line type, named like the p fields they
// mirror (no effect: an a line neither allows nor denies).
var approvalNames = []string{"sub", "obj", "act", "cond"}

// arule is one loaded a line.
type arule struct {
	line    int
	text    string
	sub     string
	obj     string
	act     string
	cond    *condition
	isRegex bool           // the model matches objects with regexMatch
	objRE   *regexp.Regexp // the compiled pattern, when isRegex
	reBad   bool           // a regexMatch pattern that does not compile (only past skipRegexLint)
}

// approvalRule lints one a line (fields[0] == "a") exactly like a p line: field count, empty
// fields, whitespace, "$", "#" outside the condition, regexMatch patterns, the object naming a
// configured server, the action, and the condition compiling. before is len(l.ps.list) when the
// line's check started.
func (l *linter) approvalRule(pl policyLine, fields []string, before int) ([]string, *condition, bool) {
	rule := fields[1:]
	n := len(approvalNames)
	padded := false
	switch {
	case len(rule) == n:
	case len(rule) == n-1:
		padded = true
		rule = append(rule, "")
		fields = append(fields, "")
	default:
		hint := "write a, <subject>, <server>/<tool>, call[, <condition>] instead"
		switch {
		case len(rule) >= n && (rule[n-1] == effectAllow || rule[n-1] == effectDeny):
			hint = fmt.Sprintf("an approval line has no effect (the p lines decide allow or deny); delete %q: write %q instead",
				rule[n-1], strings.Join(append(append([]string{approvalType}, rule[:n-1]...), rule[n:]...), ", "))
		case len(rule) > n:
			hint = fmt.Sprintf("if the condition contains commas, wrap it in double quotes: write %q instead", strings.Join(rule[n-1:], ", "))
		}
		l.add(pl.num, "%q line has %d fields after the line type, an approval line has 3 or 4 (subject, object, action[, condition]); %s",
			approvalType, len(rule), hint)
		return nil, nil, false
	}
	regex := map[int]bool{}
	for i, name := range approvalNames {
		if j, ok := l.info.pIndex[name]; ok && l.info.regex[j] {
			regex[i] = true
		}
	}
	cond := l.checkRuleFields(pl, approvalNames, regex, rule, padded)
	if len(l.ps.list) > before {
		return nil, nil, false
	}
	return fields, cond, l.unique(pl.num, fields)
}

// newARule builds a loaded a line from its linted fields (line type first).
func newARule(info *modelInfo, pl policyLine, fields []string, cond *condition) *arule {
	a := &arule{line: pl.num, text: pl.text, sub: fields[1], obj: fields[2], act: fields[3], cond: cond}
	if j, ok := info.pIndex["obj"]; ok && info.regex[j] {
		a.isRegex = true
		re, err := regexp.Compile(a.obj)
		if err != nil {
			a.reBad = true
		} else {
			a.objRE = re
		}
	}
	return a
}

// matches reports whether the a line's subject, object and action match the request (its
// condition aside), as the model's matcher matches a p line: the subject is the principal, a
// role it has through g lines, or a role the credential grants (c.cred); the object matches by
// keyMatch (or regexMatch); the action is the same. A pattern that does not compile matches
// (fail closed: approval is needed).
func (a *arule) matches(c *callCtx, subjects map[string]bool) bool {
	if !subjects[a.sub] && !c.cred[a.sub] {
		return false
	}
	if a.act != c.req.Action {
		return false
	}
	switch {
	case a.reBad:
		return true
	case a.isRegex:
		return a.objRE.MatchString(c.req.Object)
	}
	return util.KeyMatch(c.req.Object, a.obj)
}

// applies evaluates the a line's condition: no condition, always; a condition that cannot be
// evaluated fails closed (approval IS needed), with the error.
func (a *arule) applies(c *callCtx) (bool, error) {
	if a.cond == nil {
		return true, nil
	}
	ok, err := c.evalCond(a.cond)
	if err != nil {
		return true, err
	}
	return ok, nil
}

// ApprovalRule reports whether req needs a human approval before it runs, and the a line that
// says so ("file:line", the first in file order whose subject, object, action and condition
// match). An a line's subject matches like a p line's: the principal, a role it has through g
// lines, or a role the credential grants (Subject.Roles that are roles of the policy, with what
// they inherit). A condition that cannot be evaluated counts as holding: approval is needed.
//
// The answer is only meaningful for a call [Policy.Decide] allowed: an approval never turns a
// deny into an allow. Ask the same *Policy for both (one [Store.Current]). A request Decide
// always denies (no policy, an empty principal, object or action, a principal named like a
// role) answers ("", false).
func (p *Policy) ApprovalRule(req Request) (rule string, needed bool) {
	if p == nil || len(p.arules) == 0 {
		return "", false
	}
	if req.Subject.Principal == "" || req.Object == "" || req.Action == "" || p.IsRole(req.Subject.Principal) {
		return "", false
	}
	c := p.newCtx(req, false)
	subjects := p.roleClosure(req.Subject.Principal)
	for _, a := range p.arules {
		if !a.matches(c, subjects) {
			continue
		}
		if ok, _ := a.applies(c); ok {
			return p.aref(a), true
		}
	}
	return "", false
}

// Approvals is the number of approval (a) lines loaded.
func (p *Policy) Approvals() int {
	if p == nil {
		return 0
	}
	return len(p.arules)
}

func (p *Policy) aref(a *arule) string {
	return fmt.Sprintf("%s:%d", p.policyPath, a.line)
}

// ApprovalRule is [Policy.ApprovalRule] on the current policy.
func (s *Store) ApprovalRule(req Request) (string, bool) { return s.Current().ApprovalRule(req) }
