package authz

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/casbin/casbin/v2/constant"
	"github.com/casbin/casbin/v2/model"
)

// Names the model uses for toolgate's functions in the matcher.
const (
	fnCond    = "cond"    // cond(r.args, p.cond, p.eft): the line's condition holds for this call
	fnHasRole = "hasRole" // hasRole(r.args, p.sub): the credential grants role p.sub for this call
)

// The definitions a model must have, exactly (Casbin's escaped token names).
var (
	wantRequest = []string{"r_sub", "r_obj", "r_act", "r_args"}
	wantPolicy  = []string{"p_sub", "p_obj", "p_act", "p_eft", "p_cond"}
)

// canonicalMatcher is the matcher toolgate accepts, up to spacing, redundant parentheses, the
// order of the && parts, the order of the two sides of || and ==, and regexMatch for keyMatch.
const canonicalMatcher = "m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft)"

// modelInfo is what toolgate needs to know about a loaded model.
type modelInfo struct {
	reqTokens int            // always 4 (sub, obj, act, args)
	rTokens   []string       // escaped request names (r_sub, ...)
	reqArgs   string         // escaped name of the 4th request token ("r_args")
	pNames    []string       // p fields without the "p_" prefix: sub, obj, act, eft, cond
	pIndex    map[string]int // field name -> index in a p rule
	hasCond   bool           // the last p field is "cond" (optional in a line); always true
	regex     map[int]bool   // p rule fields used as regexMatch patterns
	gTypes    []string       // role definitions: always just g
	matcher   string         // the matcher as Casbin evaluates it (r.sub escaped to r_sub)
}

var reEval = regexp.MustCompile(`\beval\s*\(`)

// assignLine returns the 1-based line of the first "key = ..." in a model file, or 0.
func assignLine(text []byte, key string) int {
	re := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(key) + `\s*=`)
	for i, l := range strings.Split(string(text), "\n") {
		if re.MatchString(l) {
			return i + 1
		}
	}
	return 0
}

func sameTokens(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkModel reports every reason model m (from file/text) cannot serve toolgate's decisions, and
// returns what the policy loader needs, or nil when the model is unusable.
//
// toolgate accepts one model, up to comments and spacing: the repository's model.conf. The
// request must be r = sub, obj, act, args (args carries the arguments and the credential's roles
// into the matcher); p = sub, obj, act, eft, cond; one role definition g = _, _; deny-override;
// and the matcher must be exactly the conjunction of (g(r.sub, p.sub) || hasRole(r.args, p.sub)),
// keyMatch(r.obj, p.obj) (or regexMatch(r.obj, p.obj)), r.act == p.act and
// cond(r.args, p.cond, p.eft) (see [matcherProblem]). Anything else could open access (a
// top-level ||), or drop the conditions or the credential's roles, with their denies.
func checkModel(file string, text []byte, m model.Model, ps *problems) *modelInfo {
	before := len(ps.list)
	info := &modelInfo{pIndex: map[string]int{}, regex: map[int]bool{}}
	at := func(key string) int { return assignLine(text, key) }

	for key := range m["r"] {
		if key != "r" {
			ps.add(file, at(key), "request type %q is not supported, toolgate asks with r only; delete it", key)
		}
	}
	r, ok := m["r"]["r"]
	switch {
	case !ok:
		ps.add(file, 0, "no request definition; write [request_definition] r = sub, obj, act, args")
	case !sameTokens(r.Tokens, wantRequest):
		ps.add(file, at("r"), "request definition r = %s must be exactly r = sub, obj, act, args (args carries the call's arguments and the credential's roles to the matcher); write r = sub, obj, act, args instead",
			strings.TrimSpace(r.Value))
	default:
		info.reqTokens = len(r.Tokens)
		info.rTokens = r.Tokens
		info.reqArgs = r.Tokens[3]
	}

	for key := range m["p"] {
		if key != "p" {
			ps.add(file, at(key), "policy type %q is not supported, toolgate decides with p only; delete it", key)
		}
	}
	p, ok := m["p"]["p"]
	switch {
	case !ok:
		ps.add(file, 0, "no policy definition; write [policy_definition] p = sub, obj, act, eft, cond")
	case !sameTokens(p.Tokens, wantPolicy):
		reason := "must be exactly p = sub, obj, act, eft, cond"
		names := strings.Split(strings.ReplaceAll(strings.TrimSpace(p.Value), " ", ""), ",")
		switch {
		case !containsName(names, "eft"):
			reason = "has no eft field, so deny lines are impossible"
		case containsName(names, "cond") && names[len(names)-1] != "cond":
			reason = "must have the cond field last (it is optional in policy lines)"
		case !containsName(names, "cond"):
			reason = "has no cond field, so policy lines could not carry argument conditions"
		}
		ps.add(file, at("p"), "policy definition p = %s %s; write p = sub, obj, act, eft, cond instead", strings.TrimSpace(p.Value), reason)
	default:
		for i, t := range p.Tokens {
			name := strings.TrimPrefix(t, "p_")
			info.pNames = append(info.pNames, name)
			info.pIndex[name] = i
		}
		info.hasCond = true
	}

	// Casbin's effector recognises an effect by its exact text, spacing included: a variant
	// would load and then fail every decision.
	if e, ok := m["e"]["e"]; !ok || e.Value != constant.AllowAndDenyEffect {
		value := ""
		if ok {
			value = strings.TrimSpace(e.Value)
		}
		ps.add(file, at("e"), "policy effect %q is not deny-override, spelled exactly as Casbin recognises it; write e = some(where (p.eft == allow)) && !some(where (p.eft == deny)) instead",
			strings.ReplaceAll(value, "p_eft", "p.eft"))
	}

	if _, ok := m["g"]["g"]; !ok {
		ps.add(file, 0, "no role definition; write [role_definition] g = _, _")
	}
	for key, g := range m["g"] {
		switch {
		case key != "g":
			ps.add(file, at(key), "role definition %s is not used by toolgate's matcher (its lines would never apply); delete it and write its lines as g lines", key)
		case len(g.Tokens) != 2 || len(g.ParamsTokens) != 0:
			ps.add(file, at(key), "role definition %s = %s is not supported (no domains or conditional roles); write %s = _, _ instead",
				key, strings.TrimSpace(g.Value), key)
		default:
			info.gTypes = append(info.gTypes, key)
		}
	}

	mt, ok := m["m"]["m"]
	if !ok {
		ps.add(file, 0, "no matcher; write [matchers] %s", canonicalMatcher)
	} else {
		info.matcher = mt.Value
		if reEval.MatchString(mt.Value) {
			ps.add(file, at("m"), "the matcher calls eval(), which toolgate does not support (argument conditions go in the policy's cond field); write %s instead", canonicalMatcher)
		} else if objFn, reason := matcherProblem(mt.Value); reason != "" {
			ps.add(file, at("m"), "the matcher %s; write %s instead (regexMatch(r.obj, p.obj) may replace keyMatch)", reason, canonicalMatcher)
		} else if objFn == "regexMatch" {
			info.regex[info.pIndex["obj"]] = true
		}
	}

	if len(ps.list) > before {
		return nil
	}
	return info
}

func containsName(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// A small parser for the matcher: just enough grammar to recognise toolgate's matcher and refuse
// everything else. mExpr is one node of its syntax tree.
type mExpr struct {
	op   string   // "&&", "||", "==", "call", "ident"
	name string   // call: the function; ident: the name
	kids []*mExpr // operands (&& and || flattened), or a call's arguments
}

func (e *mExpr) String() string {
	switch e.op {
	case "ident":
		return strings.Replace(e.name, "_", ".", 1)
	case "call":
		args := make([]string, len(e.kids))
		for i, k := range e.kids {
			args[i] = k.String()
		}
		return e.name + "(" + strings.Join(args, ", ") + ")"
	case "==":
		return e.kids[0].String() + " == " + e.kids[1].String()
	}
	parts := make([]string, len(e.kids))
	for i, k := range e.kids {
		parts[i] = k.String()
		if k.op == "&&" || k.op == "||" {
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, " "+e.op+" ")
}

type mParser struct {
	toks []string
	pos  int
}

var reMatcherToken = regexp.MustCompile(`\s*([A-Za-z_][A-Za-z0-9_]*|&&|\|\||==|[(),])`)

func tokenizeMatcher(s string) ([]string, error) {
	var toks []string
	for rest := s; strings.TrimSpace(rest) != ""; {
		loc := reMatcherToken.FindStringSubmatchIndex(rest)
		if loc == nil || loc[0] != 0 {
			return nil, fmt.Errorf("contains %q, which toolgate's matcher does not", strings.TrimSpace(rest))
		}
		toks = append(toks, rest[loc[2]:loc[3]])
		rest = rest[loc[1]:]
	}
	return toks, nil
}

func (p *mParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *mParser) next() string {
	t := p.peek()
	p.pos++
	return t
}

func (p *mParser) expect(t string) error {
	if got := p.next(); got != t {
		if got == "" {
			got = "the end"
		}
		return fmt.Errorf("cannot be read (expected %q, found %q)", t, got)
	}
	return nil
}

// parseBinary parses operands joined by op ("||" over "&&" over the rest), flattening
// nested uses of the same operator (a && (b && c) is a && b && c).
func (p *mParser) parseBinary(op string, operand func() (*mExpr, error)) (*mExpr, error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	e := &mExpr{op: op}
	add := func(x *mExpr) {
		if x.op == op {
			e.kids = append(e.kids, x.kids...)
		} else {
			e.kids = append(e.kids, x)
		}
	}
	add(first)
	for p.peek() == op {
		p.next()
		x, err := operand()
		if err != nil {
			return nil, err
		}
		add(x)
	}
	if len(e.kids) == 1 {
		return e.kids[0], nil
	}
	return e, nil
}

func (p *mParser) parseOr() (*mExpr, error) { return p.parseBinary("||", p.parseAnd) }
func (p *mParser) parseAnd() (*mExpr, error) {
	return p.parseBinary("&&", p.parseOperand)
}

func (p *mParser) parseOperand() (*mExpr, error) {
	t := p.next()
	if t == "(" {
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		return e, p.expect(")")
	}
	if !isIdent(t) {
		if t == "" {
			t = "the end"
		}
		return nil, fmt.Errorf("cannot be read (unexpected %q)", t)
	}
	if p.peek() == "(" {
		p.next()
		call := &mExpr{op: "call", name: t}
		for {
			a := p.next()
			if !isIdent(a) {
				return nil, fmt.Errorf("passes %q to %s(), where toolgate's matcher passes only request and policy fields", a, t)
			}
			call.kids = append(call.kids, &mExpr{op: "ident", name: a})
			if p.peek() == "," {
				p.next()
				continue
			}
			return call, p.expect(")")
		}
	}
	left := &mExpr{op: "ident", name: t}
	if p.peek() != "==" {
		return nil, fmt.Errorf("uses %s alone, where toolgate's matcher compares or calls", left)
	}
	p.next()
	r := p.next()
	if !isIdent(r) {
		return nil, fmt.Errorf("compares %s with %q", left, r)
	}
	return &mExpr{op: "==", kids: []*mExpr{left, {op: "ident", name: r}}}, nil
}

func isIdent(t string) bool {
	return t != "" && t != "&&" && t != "||" && t != "==" && t != "(" && t != ")" && t != ","
}

// isCall reports whether e is name(args...), args by their escaped names.
func isCall(e *mExpr, name string, args ...string) bool {
	if e.op != "call" || e.name != name || len(e.kids) != len(args) {
		return false
	}
	for i, a := range args {
		if e.kids[i].op != "ident" || e.kids[i].name != a {
			return false
		}
	}
	return true
}

// matcherProblem checks the matcher (as Casbin stores it, r.sub escaped to r_sub) against
// toolgate's: after flattening, it must be a conjunction (&&) of exactly these four parts, in any
// order, each once:
//
//	g(r.sub, p.sub) || hasRole(r.args, p.sub)   (either order)
//	keyMatch(r.obj, p.obj) or regexMatch(r.obj, p.obj)
//	r.act == p.act                              (either order)
//	cond(r.args, p.cond, p.eft)
//
// It returns the object-matching function used, and "" or why the matcher is refused (a phrase
// that follows "the matcher").
func matcherProblem(matcher string) (objFn, reason string) {
	toks, err := tokenizeMatcher(matcher)
	if err != nil {
		return "", err.Error()
	}
	ps := &mParser{toks: toks}
	root, err := ps.parseOr()
	if err == nil && ps.pos < len(toks) {
		err = fmt.Errorf("cannot be read (unexpected %q)", toks[ps.pos])
	}
	if err != nil {
		return "", err.Error()
	}
	if root.op == "||" {
		return "", fmt.Sprintf("joins its parts with a top-level ||, so one part alone would grant access (%s)", root)
	}
	parts := []*mExpr{root}
	if root.op == "&&" {
		parts = root.kids
	}
	var subj, obj, act, cond, bareG, bareHasRole int
	for _, e := range parts {
		switch {
		case e.op == "||" && len(e.kids) == 2 &&
			(isCall(e.kids[0], "g", "r_sub", "p_sub") && isCall(e.kids[1], fnHasRole, "r_args", "p_sub") ||
				isCall(e.kids[1], "g", "r_sub", "p_sub") && isCall(e.kids[0], fnHasRole, "r_args", "p_sub")):
			subj++
		case isCall(e, "g", "r_sub", "p_sub"):
			bareG++
		case isCall(e, fnHasRole, "r_args", "p_sub"):
			bareHasRole++
		case isCall(e, "keyMatch", "r_obj", "p_obj"):
			obj++
			objFn = "keyMatch"
		case isCall(e, "regexMatch", "r_obj", "p_obj"):
			obj++
			objFn = "regexMatch"
		case e.op == "==" && (e.kids[0].name == "r_act" && e.kids[1].name == "p_act" || e.kids[0].name == "p_act" && e.kids[1].name == "r_act"):
			act++
		case isCall(e, fnCond, "r_args", "p_cond", "p_eft"):
			cond++
		default:
			return "", fmt.Sprintf("has the part %s, which toolgate's matcher does not have", e)
		}
	}
	switch {
	case cond == 0:
		return "", fmt.Sprintf("never calls %s(r.args, p.cond, p.eft), so every condition would be ignored (a conditional allow would allow always)", fnCond)
	case subj == 0 && bareHasRole == 0:
		return "", fmt.Sprintf("never calls %s(r.args, p.sub), so roles granted by credentials (a JWT roles claim) would be ignored, with their deny lines", fnHasRole)
	case subj == 0 && bareG == 0:
		return "", "never calls g(r.sub, p.sub), so the roles g lines give would be ignored, with their deny lines"
	case subj == 0:
		return "", fmt.Sprintf("requires both g(r.sub, p.sub) and %s(r.args, p.sub), where a line applies through either: join them as (g(r.sub, p.sub) || %s(r.args, p.sub))", fnHasRole, fnHasRole)
	case cond+subj+bareG+bareHasRole > 2:
		return "", "has a part twice, or g or hasRole outside (g(r.sub, p.sub) || hasRole(r.args, p.sub))"
	case obj != 1:
		return "", "does not match the object exactly once with keyMatch(r.obj, p.obj) or regexMatch(r.obj, p.obj)"
	case act != 1:
		return "", "does not compare r.act == p.act exactly once"
	}
	return objFn, ""
}
