package authz

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
)

// maxRoleDepth is how many g links Casbin's default role manager follows from a name (pinned by
// TestPitfallRoleDepthLimit). A deeper chain loads fine and its far end silently never applies.
const maxRoleDepth = 10

// linter checks the lines of one policy file against one model and collects every problem.
type linter struct {
	file    string
	info    *modelInfo
	opts    Options
	servers map[string]bool
	ps      *problems

	seen     map[string]int // rule key -> first line, for duplicates
	warnings []string
	edges    map[string][]roleEdge // per g type
	subjects map[string]bool       // subjects of p lines
}

type roleEdge struct {
	member, role string
	line         int
}

func newLinter(file string, info *modelInfo, o Options, ps *problems) *linter {
	l := &linter{file: file, info: info, opts: o, ps: ps, seen: map[string]int{}, edges: map[string][]roleEdge{}, subjects: map[string]bool{}}
	if len(o.Servers) > 0 {
		l.servers = map[string]bool{}
		for _, s := range o.Servers {
			l.servers[s] = true
		}
	}
	return l
}

func (l *linter) add(line int, format string, args ...any) {
	l.ps.add(l.file, line, format, args...)
}

func (l *linter) warn(line int, format string, args ...any) {
	l.warnings = append(l.warnings, fmt.Sprintf("%s:%d: %s", l.file, line, fmt.Sprintf(format, args...)))
}

// lineRule checks one non-comment line. It returns the padded fields (ptype first) and the
// compiled condition, or ok false when the line has a problem.
func (l *linter) lineRule(pl policyLine) (fields []string, cond *condition, ok bool) {
	before := len(l.ps.list)
	fields, err := splitFields(pl.text)
	if err != nil {
		err = unwrapCSV(err)
		l.add(pl.num, "not a valid CSV line: %v; %s", err, csvHint(err))
		return nil, nil, false
	}
	ptype := fields[0]
	if reason := checkField("line type", ptype); reason != "" {
		l.add(pl.num, "%s", reason)
		return nil, nil, false
	}
	switch ptype {
	case approvalType:
		return l.approvalRule(pl, fields, before)
	case scopeType:
		return l.scopeRule(pl, fields, before)
	}
	sec := ptype[:1]
	if sec != "p" && sec != "g" {
		l.add(pl.num, "line type %q is neither a permission (p) nor a role (g) line, nor an approval (a) or scope (s) line; write p, <subject>, <server>/<tool>, call, allow, g, <principal>, <role>, a, <subject>, <server>/<tool>, call or s, <server>/<tool>, call, <scope> instead", ptype)
		return nil, nil, false
	}
	if sec == "p" && ptype != "p" {
		l.add(pl.num, "line type %q is not defined in the model; write p instead", ptype)
		return nil, nil, false
	}
	if sec == "g" && !l.hasG(ptype) {
		l.add(pl.num, "line type %q is not defined in the model; write g instead", ptype)
		return nil, nil, false
	}
	rule := fields[1:]

	if sec == "g" {
		if len(rule) != 2 {
			l.add(pl.num, "%q line has %d fields after the line type, the model defines 2 (%s = _, _); write g, <principal>, <role> instead", ptype, len(rule), ptype)
			return nil, nil, false
		}
		for i, v := range rule {
			what := describeField("g", i, "")
			if reason := checkField(what, v); reason != "" {
				l.add(pl.num, "%s", reason)
			} else if reason := checkCommentChar(what, v); reason != "" {
				l.add(pl.num, "%s", reason)
			}
		}
		if len(l.ps.list) > before {
			return nil, nil, false
		}
		l.edges[ptype] = append(l.edges[ptype], roleEdge{member: rule[0], role: rule[1], line: pl.num})
		return fields, nil, l.unique(pl.num, fields)
	}

	n := len(l.info.pNames)
	padded := false
	switch {
	case len(rule) == n:
	case l.info.hasCond && len(rule) == n-1:
		padded = true
		rule = append(rule, "")
		fields = append(fields, "")
	default:
		want := fmt.Sprint(n)
		if l.info.hasCond {
			want = fmt.Sprintf("%d or %d", n-1, n)
		}
		hint := "write p, <subject>, <server>/<tool>, call, allow|deny instead"
		if l.info.hasCond {
			hint = "write p, <subject>, <server>/<tool>, call, allow|deny[, <condition>] instead"
			if len(rule) > n {
				hint = fmt.Sprintf("if the condition contains commas, wrap it in double quotes: write %q instead", strings.Join(rule[n-1:], ", "))
			}
		}
		l.add(pl.num, "%q line has %d fields after the line type, the model defines %s (p = %s); %s",
			ptype, len(rule), want, strings.Join(l.info.pNames, ", "), hint)
		return nil, nil, false
	}

	cond = l.checkRuleFields(pl, l.info.pNames, l.info.regex, rule, padded)
	if len(l.ps.list) > before {
		return nil, nil, false
	}
	return fields, cond, l.unique(pl.num, fields)
}

// checkRuleFields checks the fields of a p or a line (rule, without the line type), named by
// names ("sub", "obj", ...; regex marks the regexMatch patterns), and returns the compiled
// condition. Problems go to l.ps. padded: the condition field was added because the line had
// none.
func (l *linter) checkRuleFields(pl policyLine, names []string, regex map[int]bool, rule []string, padded bool) (cond *condition) {
	for i, v := range rule {
		name := names[i]
		what := describeField("p", i, name)
		if name == "cond" {
			if v == "" {
				if !padded {
					l.add(pl.num, "the condition after the last comma is empty; delete the trailing comma (no condition means always)")
				}
				continue
			}
			if reason := checkField(what, v); reason != "" {
				l.add(pl.num, "%s", reason)
				continue
			}
			c, err := compileCond(v)
			if err != nil {
				l.add(pl.num, "condition %q does not compile: %v; write e.g. amount <= 100 or region == principal.region", v, err)
				continue
			}
			cond = c
			continue
		}
		check := v
		if regex[i] {
			check = strings.TrimSuffix(v, "$") // the end anchor is the one "$" a pattern may have
		}
		if reason := checkField(what, check); reason != "" {
			l.add(pl.num, "%s", reason)
			continue
		}
		if reason := checkCommentChar(what, v); reason != "" {
			l.add(pl.num, "%s", reason)
			continue
		}
		if regex[i] && !l.opts.skipRegexLint {
			if reason := checkPattern(what, v); reason != "" {
				l.add(pl.num, "%s", reason)
				continue
			}
		}
		switch name {
		case "eft":
			if v != effectAllow && v != effectDeny {
				fix := effectAllow
				if strings.HasPrefix(strings.ToLower(v), "d") {
					fix = effectDeny
				}
				l.add(pl.num, "effect %q must be exactly %q or %q (lower case); write %s instead", v, effectAllow, effectDeny, fix)
			}
		case "act":
			if !knownActs[v] {
				l.add(pl.num, "action %q is unknown; write %s (tools), %s (resources) or %s (prompts) instead", v, ActCall, ActRead, ActGet)
			}
		case "obj":
			if reason := l.checkObject(what, v, regex[i]); reason != "" {
				l.add(pl.num, "%s", reason)
			}
		case "sub":
			l.subjects[v] = true
		}
	}
	return cond
}

func (l *linter) hasG(ptype string) bool {
	for _, g := range l.info.gTypes {
		if g == ptype {
			return true
		}
	}
	return false
}

// unique warns about a rule that repeats an earlier line (Casbin keeps only the first; deleting
// one copy to revoke it would change nothing). It always returns true: a duplicate is harmless.
func (l *linter) unique(line int, fields []string) bool {
	key := strings.Join(fields, "\x00")
	if first, ok := l.seen[key]; ok {
		l.warn(line, "same rule as line %d; delete one of them (removing only one would not revoke it)", first)
		return true
	}
	l.seen[key] = line
	return true
}

// checkPattern returns why a regexMatch pattern is unusable, or "": it must compile and be
// anchored at both ends, as one anchored expression (^(a|b)$, not ^a|b$).
func checkPattern(what, v string) string {
	if _, err := regexp.Compile(v); err != nil {
		return fmt.Sprintf("%s %q is not a valid regular expression (%v); write an anchored pattern such as ^orders/(get|update)_order$", what, v, unwrapRegexErr(err))
	}
	re, err := syntax.Parse(v, syntax.Perl)
	if err != nil {
		return fmt.Sprintf("%s %q is not a valid regular expression (%v)", what, v, err)
	}
	anchored := re.Op == syntax.OpConcat && len(re.Sub) >= 2 &&
		re.Sub[0].Op == syntax.OpBeginText && re.Sub[len(re.Sub)-1].Op == syntax.OpEndText
	if !anchored {
		fix := "^" + strings.TrimSuffix(strings.TrimPrefix(v, "^"), "$") + "$"
		if strings.Contains(v, "|") {
			fix = "^(" + strings.TrimSuffix(strings.TrimPrefix(v, "^"), "$") + ")$"
		}
		return fmt.Sprintf("%s %q is not anchored at both ends (regexMatch finds the pattern anywhere: \"read\" matches \"unread\"); write %q instead", what, v, fix)
	}
	return ""
}

func unwrapRegexErr(err error) error {
	if se, ok := err.(*syntax.Error); ok {
		return fmt.Errorf("%s: %s", se.Code, se.Expr)
	}
	return err
}

// checkObject returns why an object does not name a configured server, or "". Without
// configured servers (unit tests) it checks nothing.
func (l *linter) checkObject(what, v string, isRegex bool) string {
	if l.servers == nil {
		return ""
	}
	known := make([]string, 0, len(l.servers))
	for s := range l.servers {
		known = append(known, s)
	}
	sort.Strings(known)
	example := known[0] + "/*"
	var server string
	if isRegex {
		re, err := regexp.Compile(v)
		if err != nil {
			return "" // reported by checkPattern
		}
		prefix, _ := re.LiteralPrefix()
		i := strings.Index(prefix, "/")
		if i <= 0 {
			return fmt.Sprintf("%s %q must start with ^<server>/ so that it stays within one server; write ^%s/(...)$ instead", what, v, known[0])
		}
		server = prefix[:i]
	} else {
		i := strings.Index(v, "/")
		switch {
		case i < 0 && strings.Contains(v, "*"):
			return fmt.Sprintf("%s %q is a wildcard over every server; name the server: write %s instead", what, v, example)
		case i <= 0:
			return fmt.Sprintf("%s %q must be <server>/<tool> or <server>/*; write %s instead", what, v, example)
		case strings.Contains(v[:i], "*"):
			return fmt.Sprintf("%s %q is a wildcard over servers; name the server: write %s instead", what, v, example)
		case i == len(v)-1:
			return fmt.Sprintf("%s %q names no tool; write %s* instead", what, v, v)
		}
		server = v[:i]
	}
	if !l.servers[server] {
		return fmt.Sprintf("%s %q names server %q, which is not configured (configured: %s); write %s or add %s to mcpServers",
			what, v, server, strings.Join(known, ", "), example, server)
	}
	return ""
}

// checkRoles reports role cycles and chains deeper than Casbin follows, per g type, and warns
// about roles that grant nothing.
func (l *linter) checkRoles() {
	types := make([]string, 0, len(l.edges))
	for t := range l.edges {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		l.checkRoleGraph(t, l.edges[t])
	}
	l.checkUnusedRoles()
}

func (l *linter) checkRoleGraph(gtype string, edges []roleEdge) {
	out := map[string][]roleEdge{}
	in := map[string][]roleEdge{}
	var nodes []string
	seen := map[string]bool{}
	for _, e := range edges {
		out[e.member] = append(out[e.member], e)
		in[e.role] = append(in[e.role], e)
		for _, n := range []string{e.member, e.role} {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
	}

	// Cycles: strongly connected components (Tarjan) with more than one name, or a self link.
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	inCycle := map[string]bool{}
	next := 0
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range out[v] {
			w := e.role
			if _, ok := index[w]; !ok {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		member := map[string]bool{}
		for _, c := range comp {
			member[c] = true
		}
		var lines []int
		var links []string
		for _, c := range comp {
			for _, e := range out[c] {
				if member[e.role] {
					lines = append(lines, e.line)
					links = append(links, fmt.Sprintf("%s -> %s", e.member, e.role))
				}
			}
		}
		if len(lines) == 0 {
			return
		}
		for _, c := range comp {
			inCycle[c] = true
		}
		sort.Ints(lines)
		sort.Strings(links)
		if len(lines) == 1 && len(comp) == 1 {
			l.add(lines[0], "%s line makes %q a member of itself; delete it", gtype, comp[0])
			return
		}
		l.add(lines[0], "%s lines %s form a cycle of roles (%s); delete the line that closes the loop",
			gtype, joinInts(lines), strings.Join(links, ", "))
	}
	for _, n := range nodes {
		if _, ok := index[n]; !ok {
			strong(n)
		}
	}

	// Depth: the longest chain of links ending at each name, outside cycles.
	depth := map[string]int{}
	via := map[string]string{}
	var depthOf func(n string) int
	visiting := map[string]bool{}
	depthOf = func(n string) int {
		if d, ok := depth[n]; ok {
			return d
		}
		if visiting[n] {
			return 0
		}
		visiting[n] = true
		best := 0
		for _, e := range in[n] {
			if inCycle[e.member] {
				continue
			}
			if d := depthOf(e.member) + 1; d > best {
				best = d
				via[n] = e.member
			}
		}
		visiting[n] = false
		depth[n] = best
		return best
	}
	for _, e := range edges {
		if inCycle[e.member] || inCycle[e.role] {
			continue
		}
		d := depthOf(e.member) + 1
		if d <= maxRoleDepth {
			continue
		}
		chain := []string{e.role, e.member}
		for n := e.member; via[n] != ""; n = via[n] {
			chain = append(chain, via[n])
		}
		for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
			chain[i], chain[j] = chain[j], chain[i]
		}
		l.add(e.line, "role chain %s is %d levels deep; Casbin follows at most %d, so %q would silently not apply; give %q the role directly (%s, %s, %s) or shorten the chain",
			strings.Join(chain, " -> "), d, maxRoleDepth, e.role, chain[0], gtype, chain[0], e.role)
	}
}

// checkUnusedRoles warns about a role that g lines grant but that no p line names and no g line
// extends: most often a typo ("suport_agent").
func (l *linter) checkUnusedRoles() {
	extends := map[string]bool{}
	for _, e := range l.edges["g"] {
		extends[e.member] = true
	}
	warned := map[string]bool{}
	for _, e := range l.edges["g"] {
		if l.subjects[e.role] || extends[e.role] || warned[e.role] {
			continue
		}
		warned[e.role] = true
		hint := ""
		if s := closest(e.role, l.subjects); s != "" {
			hint = fmt.Sprintf("; did you mean %q?", s)
		}
		l.warn(e.line, "role %q grants nothing: no p line names it%s", e.role, hint)
	}
}

// checkPrincipals returns the policy's role names (see [Policy.IsRole]) and reports every
// configured principal (Options.Principals) that a g line gives as a role: a principal named
// like a role would hold that role's lines.
func (l *linter) checkPrincipals() map[string]bool {
	roles, given := roleNames(l.opts.Principals, l.edges["g"], l.subjects)
	for _, e := range given {
		l.add(e.line, problemPrincipalIsRole, e.role)
	}
	return roles
}

// problemPrincipalIsRole is the load error of a configured principal that a g line gives as a role.
const problemPrincipalIsRole = "%q is a configured principal (an API key, the stdio or the anonymous principal) and this g line makes it a role, so that principal would hold the role's lines; give the role another name (or rename the principal)"

// roleNames are the role names of a policy whose g lines are edges and whose p lines name
// subjects, with principals configured (see [Policy.IsRole]); given are the g lines that give a
// configured principal as a role, the first one for each such principal, in file order. A policy
// load refuses those; [Policy.WithPrincipals] does too.
func roleNames(configured []string, edges []roleEdge, subjects map[string]bool) (roles map[string]bool, given []roleEdge) {
	principals := map[string]bool{}
	for _, n := range configured {
		principals[n] = true
	}
	isRole := map[string]bool{}
	for _, e := range edges {
		if principals[e.role] && !isRole[e.role] {
			given = append(given, e)
		}
		isRole[e.role] = true
	}
	for _, e := range edges {
		if !isRole[e.member] {
			principals[e.member] = true
		}
	}
	roles = map[string]bool{}
	for r := range isRole {
		roles[r] = true
	}
	for s := range subjects {
		if !principals[s] {
			roles[s] = true
		}
	}
	return roles, given
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// closest returns the name in set within edit distance 2 of s, or "".
func closest(s string, set map[string]bool) string {
	best, bestD := "", 3
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
