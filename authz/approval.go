package authz

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
	digest  string         // see ruleDigest
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
func newARule(info *modelInfo, modelText []byte, pl policyLine, fields []string, cond *condition) *arule {
	a := &arule{line: pl.num, text: pl.text, sub: fields[1], obj: fields[2], act: fields[3], cond: cond,
		digest: ruleDigest(modelText, fields[1:])}
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

// ruleDigest is the version of one a line that an approval is bound to: the first 16 hex digits of
// a SHA-256 over the model and the line's fields (subject, object, action, condition), each
// length-prefixed. It is what the line means, not where it is: moving the line, or editing any other
// line, keeps it; changing any of its fields, or the model that gives them their meaning (keyMatch or
// regexMatch objects, say), changes it. Binding to the whole policy's version instead would void every
// pending approval whenever anyone adds a user (see docs/console.md, "How a decision stays bound to the call").
func ruleDigest(modelText []byte, fields []string) string {
	h := sha256.New()
	var n [8]byte
	for _, b := range append([][]byte{modelText}, bytesOf(fields)...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
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

// ApprovalDigest is the version of the a line that ref ("file:line", as [Policy.ApprovalRule]
// returns it) names in this policy, or "" when ref names no a line of it. An approval is bound to it:
// a held call is decided, and its approval consumed, only while the policy holds an a line with the
// same digest.
func (p *Policy) ApprovalDigest(ref string) string {
	if p == nil {
		return ""
	}
	for _, a := range p.arules {
		if p.aref(a) == ref {
			return a.digest
		}
	}
	return ""
}

// ApprovalByDigest finds the a line whose digest ([Policy.ApprovalDigest]) is digest: where it is
// now ("file:line") and its text, or ok false when this policy has no such line (it was edited or
// removed since a call was held under it).
func (p *Policy) ApprovalByDigest(digest string) (ref, text string, ok bool) {
	if p == nil || digest == "" {
		return "", "", false
	}
	for _, a := range p.arules {
		if a.digest == digest {
			return p.aref(a), a.text, true
		}
	}
	return "", "", false
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
