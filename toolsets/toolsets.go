package toolsets

import (
	"net/http"
	"path"
	"slices"
)

// Set is one toolset. The nil *Set is "no toolset": every tool is in it,
// and it asks for no discovery.
type Set struct {
	Name string
	// Tools and Exclude are path.Match patterns over the canonical
	// <server>/<tool> ("orders/*", "*/read_*"); a tool is in the set when a
	// Tools pattern matches it and no Exclude pattern does.
	Tools, Exclude []string
	// Discovery lists the discovery meta-tools instead of the set's tools.
	Discovery bool
}

// Has reports whether the tool with canonical id is in the set.
func (s *Set) Has(id string) bool {
	if s == nil {
		return true
	}
	return matchAny(s.Tools, id) && !matchAny(s.Exclude, id)
}

// Discovers reports whether the set asks for discovery.
func (s *Set) Discovers() bool { return s != nil && s.Discovery }

// Label is the set's name for logs and the audit trail; "" for no toolset.
func (s *Set) Label() string {
	if s == nil {
		return ""
	}
	return s.Name
}

// matchAny reports whether a pattern matches name. Patterns were checked
// when the config loaded (path.Match's only error is a bad pattern), so an
// error here counts as no match.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// Rule picks Set for the requests it matches: every field that is set
// must match (patterns as path.Match); a rule with none set matches every
// request.
type Rule struct {
	Principal string            // the authenticated principal
	Role      string            // one of the principal's roles (policy g lines and the credential's)
	Client    string            // the clientInfo name the client gave at initialize (or in a 2026-07-28 request's _meta)
	Headers   map[string]string // HTTP request headers (canonical names) and the value each must match
	Set       *Set
}

// Request is what the rules look at.
type Request struct {
	Principal string
	// Roles gives the principal's roles; it is asked only when a rule
	// names a role (it consults the policy).
	Roles  func() []string
	Client string
	Header http.Header // nil over stdio
}

// Options are the toolsets and the rules that pick them, in order.
type Options struct {
	Rules []Rule
}

// Selector picks a request's toolset: the first rule that matches wins.
// The zero Selector, and a nil one, pick no toolset for every request.
type Selector struct {
	rules []Rule
}

// New is a Selector for the rules, in order.
func New(o Options) *Selector { return &Selector{rules: o.Rules} }

// Select is the toolset of the first rule r matches, and its index (-1 and
// nil when none matches: every tool the policy allows, listed as before).
func (s *Selector) Select(r Request) (*Set, int) {
	if s == nil {
		return nil, -1
	}
	var roles []string
	rolesAsked := false
	for i, rule := range s.rules {
		if rule.Role != "" && !rolesAsked {
			rolesAsked = true
			if r.Roles != nil {
				roles = r.Roles()
			}
		}
		if rule.matches(r, roles) {
			return rule.Set, i
		}
	}
	return nil, -1
}

// Empty reports whether no rule can pick a toolset.
func (s *Selector) Empty() bool { return s == nil || len(s.rules) == 0 }

func (rule Rule) matches(r Request, roles []string) bool {
	if rule.Principal != "" && !match(rule.Principal, r.Principal) {
		return false
	}
	// A client that gave no name matches no client pattern, not even "*".
	if rule.Client != "" && (r.Client == "" || !match(rule.Client, r.Client)) {
		return false
	}
	if rule.Role != "" && !anyMatch(rule.Role, roles) {
		return false
	}
	for name, want := range rule.Headers {
		if !anyMatch(want, r.Header.Values(name)) {
			return false
		}
	}
	return true
}

func match(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

func anyMatch(pattern string, values []string) bool {
	for _, v := range values {
		if match(pattern, v) {
			return true
		}
	}
	return false
}

// Unmatched are the patterns of the set (Tools, then Exclude) that match
// none of ids: a typo, or a tool its server no longer lists. `toolgate
// check` warns of them, since a pattern that matches nothing silently
// narrows a toolset.
func (s *Set) Unmatched(ids []string) []string {
	var out []string
	for _, p := range slices.Concat(s.Tools, s.Exclude) {
		if !slices.ContainsFunc(ids, func(id string) bool { return match(p, id) }) {
			out = append(out, p)
		}
	}
	return out
}
