package authz

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/casbin/casbin/v2/util"
)

// scopeType is the line type of a scope line in the policy file:
//
//	s, <server>/<tool>, call, <scope>
//
// "a call of this tool needs this OAuth scope on the caller's access token". Like a lines,
// Casbin never sees these lines: a scope is not an effect deny-override could combine, and a
// request that lacks one is answered differently from a denial (HTTP 403 with an
// insufficient_scope challenge, so that the client can ask its authorization server for the
// scope and repeat the call). [LoadPolicy] diverts them from the lines it hands to Casbin's
// adapter, lints them and evaluates them here, with the object match and the action match of p
// lines. A scope line has no subject: a scope is what the token was granted for this resource,
// whoever holds it, so the line is about the tool, not the caller. Several lines that match one
// request all apply: it needs every scope they name.
const scopeType = "s"

// scopeNames are the fields of an s line after the line type.
var scopeNames = []string{"obj", "act", "scope"}

// scopeActs are the actions a scope line may name: those the gateway can answer with a challenge
// (tools/call, resources/read, prompts/get; approving in the console is not an OAuth request).
var scopeActs = map[string]bool{ActCall: true, ActRead: true, ActGet: true}

// maxScopeBytes bounds one scope named by a policy line or carried by a token.
const maxScopeBytes = 256

// srule is one loaded s line.
type srule struct {
	line    int
	text    string
	obj     string
	act     string
	scope   string
	isRegex bool           // the model matches objects with regexMatch
	objRE   *regexp.Regexp // the compiled pattern, when isRegex
	reBad   bool           // a pattern that does not compile (only past skipRegexLint): matches
}

// scopeRule lints one s line (fields[0] == "s"): exactly three fields; the object and the action
// checked as a p line's are (the object names a configured server; a regexMatch pattern is
// anchored); the action call, read or get; the scope an RFC 6749 scope-token (printable ASCII
// without spaces, '"' or '\'). before is len(l.ps.list) when the line's check started.
func (l *linter) scopeRule(pl policyLine, fields []string, before int) ([]string, *condition, bool) {
	rule := fields[1:]
	if len(rule) != len(scopeNames) {
		hint := "write s, <server>/<tool>, call, <scope> instead (one scope per line; a tool that needs two has two lines)"
		if len(rule) > len(scopeNames) {
			if !strings.Contains(rule[0], "/") {
				hint = "a scope line has no subject (a token's scopes limit whoever holds it); " + hint
			}
		}
		l.add(pl.num, "%q line has %d fields after the line type, a scope line has 3 (object, action, scope); %s",
			scopeType, len(rule), hint)
		return nil, nil, false
	}
	regex := map[int]bool{}
	if j, ok := l.info.pIndex["obj"]; ok && l.info.regex[j] {
		regex[0] = true
	}
	l.checkRuleFields(pl, scopeNames, regex, rule, false)
	if len(l.ps.list) > before {
		return nil, nil, false
	}
	if !scopeActs[rule[1]] {
		l.add(pl.num, "action %q cannot need a scope; write %s (tools), %s (resources) or %s (prompts) instead", rule[1], ActCall, ActRead, ActGet)
		return nil, nil, false
	}
	if reason := ScopeProblem(rule[2]); reason != "" {
		l.add(pl.num, "scope %q %s; write one scope per line, e.g. orders:write", rule[2], reason)
		return nil, nil, false
	}
	return fields, nil, l.unique(pl.num, fields)
}

// ScopeProblem says why s cannot be an OAuth scope (RFC 6749 section 3.3: scope-token =
// 1*( %x21 / %x23-5B / %x5D-7E ), so no space, '"' or '\'), or "" when it can. It also refuses
// one longer than 256 bytes. Package authn applies it to the scopes a token carries.
func ScopeProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > maxScopeBytes:
		return fmt.Sprintf("is longer than %d bytes", maxScopeBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return `holds a character a scope cannot (a space, '"', '\' or one outside printable ASCII)`
		}
	}
	return ""
}

// newSRule builds a loaded s line from its linted fields (line type first).
func newSRule(info *modelInfo, pl policyLine, fields []string) *srule {
	s := &srule{line: pl.num, text: pl.text, obj: fields[1], act: fields[2], scope: fields[3]}
	if j, ok := info.pIndex["obj"]; ok && info.regex[j] {
		s.isRegex = true
		re, err := regexp.Compile(s.obj)
		if err != nil {
			s.reBad = true
		} else {
			s.objRE = re
		}
	}
	return s
}

// matches reports whether the s line's object and action match obj and act, as the model's
// matcher matches a p line's (keyMatch, or regexMatch). A pattern that does not compile matches:
// the scope is needed (fail closed).
func (s *srule) matches(obj, act string) bool {
	switch {
	case s.act != act:
		return false
	case s.reBad:
		return true
	case s.isRegex:
		return s.objRE.MatchString(obj)
	}
	return util.KeyMatch(obj, s.obj)
}

// ScopeCheck is what the scope lines say of one request.
type ScopeCheck struct {
	// Needed is every scope the matching s lines name, sorted, without duplicates: the scopes a
	// token must carry for this object and action.
	Needed []string
	// Missing are the Needed scopes the subject's token lacks, sorted; empty when the request may go
	// on, and always for a subject whose credential has no scopes (Subject.Scoped false: an API key,
	// stdio, anonymous).
	Missing []string
	// Rules are "file:line" of the lines that name a Missing scope, for the log and the audit.
	Rules []string
}

// neededScopes are the scopes the s lines matching obj and act name, with the lines, remembered
// per object and action (the answer depends on nothing else).
type neededScopes struct {
	scopes []string
	lines  map[string][]string // scope -> "file:line" of the lines naming it
}

// CheckScopes answers which scopes req needs and which of them req.Subject lacks. It is about
// scopes only: whether the policy allows the request at all is [Policy.Decide]'s answer, and the
// gateway asks this only of a request Decide allowed. A subject whose credential carries no
// scopes (Subject.Scoped false) is not limited by scope lines: its p lines alone decide.
func (p *Policy) CheckScopes(req Request) ScopeCheck {
	if p == nil || len(p.srules) == 0 {
		return ScopeCheck{}
	}
	n := p.neededFor(req.Object, req.Action)
	check := ScopeCheck{Needed: n.scopes}
	if !req.Subject.Scoped {
		return check
	}
	for _, sc := range n.scopes {
		if !slices.Contains(req.Subject.Scopes, sc) {
			check.Missing = append(check.Missing, sc)
			check.Rules = append(check.Rules, n.lines[sc]...)
		}
	}
	slices.Sort(check.Rules)
	check.Rules = slices.Compact(check.Rules)
	return check
}

func (p *Policy) neededFor(obj, act string) *neededScopes {
	key := obj + "\x00" + act
	if v, ok := p.memo.scopes.Load(key); ok {
		return v.(*neededScopes)
	}
	n := &neededScopes{}
	for _, s := range p.srules {
		if !s.matches(obj, act) {
			continue
		}
		if n.lines == nil {
			n.lines = map[string][]string{}
		}
		if _, seen := n.lines[s.scope]; !seen {
			n.scopes = append(n.scopes, s.scope)
		}
		n.lines[s.scope] = append(n.lines[s.scope], fmt.Sprintf("%s:%d", p.policyPath, s.line))
	}
	slices.Sort(n.scopes)
	// Counted against the memo's bound like every answer it keeps: a resource URI is the client's
	// string, so the objects asked about are not limited to the catalog.
	if p.memo.size.Load() < maxMemo {
		if _, loaded := p.memo.scopes.LoadOrStore(key, n); !loaded {
			p.memo.size.Add(1)
		}
	}
	return n
}

// ScopesNamed are every scope the policy's s lines name, sorted, without duplicates: what this
// resource uses, for the scopes_supported of its protected-resource metadata.
func (p *Policy) ScopesNamed() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, s := range p.srules {
		out = append(out, s.scope)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ScopeLines is the number of scope (s) lines loaded.
func (p *Policy) ScopeLines() int {
	if p == nil {
		return 0
	}
	return len(p.srules)
}

// CheckScopes is [Policy.CheckScopes] on the current policy.
func (s *Store) CheckScopes(req Request) ScopeCheck { return s.Current().CheckScopes(req) }
