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

// modelInfo is what toolgate needs to know about a loaded model.
type modelInfo struct {
	reqTokens int            // 3 (sub, obj, act) or 4 (sub, obj, act, args)
	rTokens   []string       // escaped request names (r_sub, ...)
	reqArgs   string         // escaped name of the 4th request token ("r_args"), or ""
	pNames    []string       // p fields without the "p_" prefix: sub, obj, act, eft[, cond]
	pIndex    map[string]int // field name -> index in a p rule
	hasCond   bool           // the last p field is "cond" (optional in a line)
	regex     map[int]bool   // p rule fields used as regexMatch patterns
	gTypes    []string       // role definitions (g, g2, ...)
	matcher   string         // the matcher as Casbin evaluates it (r.sub escaped to r_sub)
}

var (
	reRegexMatch = regexp.MustCompile(`regexMatch\(\s*[^,()]+?\s*,\s*p_(\w+)\s*\)`)
	reEval       = regexp.MustCompile(`\beval\s*\(`)
)

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

// checkModel reports every reason model m (from file/text) cannot serve toolgate's decisions, and
// returns what the policy loader needs, or nil when the model is unusable.
func checkModel(file string, text []byte, m model.Model, ps *problems) *modelInfo {
	before := len(ps.list)
	info := &modelInfo{pIndex: map[string]int{}, regex: map[int]bool{}}
	at := func(key string) int { return assignLine(text, key) }

	r, ok := m["r"]["r"]
	switch {
	case !ok:
		ps.add(file, 0, "no request definition; write [request_definition] r = sub, obj, act, args")
	case len(r.Tokens) != 3 && len(r.Tokens) != 4:
		ps.add(file, at("r"), "request definition r = %s must have the fields sub, obj, act and optionally args; write r = sub, obj, act, args instead",
			strings.TrimSpace(r.Value))
	default:
		info.reqTokens = len(r.Tokens)
		info.rTokens = r.Tokens
		if len(r.Tokens) == 4 {
			info.reqArgs = r.Tokens[3]
		}
	}

	for key := range m["p"] {
		if key != "p" {
			ps.add(file, at(key), "policy type %q is not supported, toolgate decides with p only; delete it", key)
		}
	}
	p, ok := m["p"]["p"]
	if !ok {
		ps.add(file, 0, "no policy definition; write [policy_definition] p = sub, obj, act, eft, cond")
	} else {
		for i, t := range p.Tokens {
			name := strings.TrimPrefix(t, "p_")
			info.pNames = append(info.pNames, name)
			info.pIndex[name] = i
		}
		if _, ok := info.pIndex["eft"]; !ok {
			ps.add(file, at("p"), "policy definition p = %s has no eft field, so deny lines are impossible; write p = sub, obj, act, eft, cond instead",
				strings.TrimSpace(p.Value))
		}
		if i, ok := info.pIndex["cond"]; ok {
			if i != len(p.Tokens)-1 {
				ps.add(file, at("p"), "the cond field must be the last one of p = %s (it is optional in policy lines); write p = sub, obj, act, eft, cond instead",
					strings.TrimSpace(p.Value))
			}
			info.hasCond = true
		}
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

	for key, g := range m["g"] {
		info.gTypes = append(info.gTypes, key)
		if len(g.Tokens) != 2 || len(g.ParamsTokens) != 0 {
			ps.add(file, at(key), "role definition %s = %s is not supported (no domains or conditional roles); write %s = _, _ instead",
				key, strings.TrimSpace(g.Value), key)
		}
	}

	mt, ok := m["m"]["m"]
	if !ok {
		ps.add(file, 0, "no matcher; write [matchers] m = ... (see the repository's model.conf)")
	} else {
		info.matcher = mt.Value
		if reEval.MatchString(mt.Value) {
			ps.add(file, at("m"), "the matcher calls eval(), which toolgate does not support; write argument conditions in the policy's cond field instead")
		}
		if info.hasCond {
			if info.reqArgs == "" {
				ps.add(file, at("r"), "p has a cond field but the request has no args field; write r = sub, obj, act, args instead")
			} else {
				want := fmt.Sprintf(`\b%s\(\s*%s\s*,\s*p_cond\s*,\s*p_eft\s*\)`, fnCond, regexp.QuoteMeta(info.reqArgs))
				if !regexp.MustCompile(want).MatchString(mt.Value) {
					ps.add(file, at("m"), "p has a cond field but the matcher never calls %s(r.%s, p.cond, p.eft), so every condition would be ignored (a conditional allow would allow always); add && %s(r.%s, p.cond, p.eft) to the matcher",
						fnCond, strings.TrimPrefix(info.reqArgs, "r_"), fnCond, strings.TrimPrefix(info.reqArgs, "r_"))
				}
			}
		}
		if info.reqArgs != "" {
			want := fmt.Sprintf(`\b%s\(\s*%s\s*,\s*p_sub\s*\)`, fnHasRole, regexp.QuoteMeta(info.reqArgs))
			if !regexp.MustCompile(want).MatchString(mt.Value) {
				ps.add(file, at("m"), "the matcher never calls %s(r.%s, p.sub), so roles granted by credentials (a JWT roles claim) would be ignored; write m = (g(r.sub, p.sub) || %s(r.%s, p.sub)) && ... instead",
					fnHasRole, strings.TrimPrefix(info.reqArgs, "r_"), fnHasRole, strings.TrimPrefix(info.reqArgs, "r_"))
			}
		}
		for _, sm := range reRegexMatch.FindAllStringSubmatch(mt.Value, -1) {
			if i, ok := info.pIndex[sm[1]]; ok {
				info.regex[i] = true
			}
		}
	}

	if len(ps.list) > before {
		return nil
	}
	return info
}
