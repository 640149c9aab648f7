package policytest

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/authz/explain"
)

// Env is what cases run against.
type Env struct {
	Policy *authz.Policy
	// Principals are the principals the configuration names (API keys, auth.stdio_principal,
	// auth.allow_anonymous). A principal is known when it is one of them or the policy names it
	// (a g line gives it a role); an unknown principal without credential roles fails its case.
	Principals []string
	// Attributes are each principal's API-key attributes, which its cases get by default.
	Attributes map[string]map[string]string
	// JWT maps a case's claims as the gateway maps a token's; nil when the configuration accepts
	// no JWTs (a case with claims then fails).
	JWT *JWT
	// ToolID maps a client-facing tool name to its canonical <server>/<tool> (through the
	// configured prefixes); nil means names must be canonical.
	ToolID func(name string) (string, error)
	// Catalog is the real catalog, nil when it is not available (offline, or the upstreams could
	// not be started): tools are then not checked to exist and arguments not against schemas.
	Catalog *Catalog
	// PolicyAliases are other names of the policy under test in a case's rule: when a candidate
	// is tested in place of the configured policy.csv, "policy.csv:37" in the shared case file means
	// line 37 of the candidate. Policy.Version's file is the policy under test.
	PolicyAliases []string
	// PolicyFile is the policy under test, which PolicyAliases stand for.
	PolicyFile string
}

// JWT is how a token's claims become a subject (config auth.jwt).
type JWT struct {
	PrincipalClaim  string   // default sub
	RolesClaim      string   // "" means tokens grant no roles
	AttributeClaims []string // claims copied to principal.<name> when they hold strings
}

// Catalog is the tools the upstreams list, by canonical ID.
type Catalog struct {
	Tools map[string]Tool
	// Down are the servers that could not be reached, with why: their tools are not checked.
	Down map[string]string
	// Blocked are tools an upstream lists but the gateway does not let run (pinning blocks a
	// changed definition, the description scan quarantined it), by canonical ID, with why: the
	// policy is still decided for them, with a note, and their arguments are not checked.
	Blocked map[string]string
}

// Tool is one catalog entry.
type Tool struct {
	Name string // client-facing
	// Check validates arguments against the tool's input schema and returns the arguments the
	// gateway's later links would see: with an operator's override, the hidden parameters set to
	// their fixed values, so that conditions are decided on them as in a real call (nil: no schema
	// to check, the arguments as written).
	Check func(args json.RawMessage) (json.RawMessage, error)
}

// Result is how one case came out.
type Result struct {
	Case   *Case
	Pass   bool
	Object string // canonical, when it could be resolved
	Got    string // allow, deny or approval; "" when the case could not be decided
	// DecidedBy are the lines that decided ("file:line"), as toolgate explain lists them; for an
	// approval, the a line.
	DecidedBy []string
	Why       string   // one sentence: explain's summary, or why the case could not run
	Lines     []string // the matching policy lines, for a failure
	Notes     []string // things a reader should know (the arguments a condition reads are missing)
}

// Run decides every case of f.
func Run(f *File, env Env) []Result {
	out := make([]Result, 0, len(f.Cases))
	for i := range f.Cases {
		out = append(out, env.run(&f.Cases[i]))
	}
	return out
}

func (env Env) run(c *Case) Result {
	r := Result{Case: c}
	sub, err := env.subject(c)
	if err != nil {
		r.Why = err.Error()
		return r
	}
	if !env.known(sub.Principal) && len(sub.Roles) == 0 {
		r.Why = fmt.Sprintf("unknown principal %q: no API key, auth.stdio_principal or auth.allow_anonymous names it and no g line of the policy does, "+
			"so it has no rights (check the spelling; for a token's principal, give its roles or claims)", sub.Principal)
		return r
	}
	obj, err := env.object(c)
	if err != nil {
		r.Why = err.Error()
		return r
	}
	r.Object = obj
	req := authz.Request{Subject: sub, Object: obj, Action: c.action(), Args: c.argsJSON()}
	if req.Action == authz.ActCall && env.Catalog != nil {
		server, _, _ := strings.Cut(obj, "/")
		if why, down := env.Catalog.Down[server]; down {
			r.Notes = append(r.Notes, fmt.Sprintf("server %s is unavailable (%s): the tool and its schema were not checked", server, why))
		} else if why, blocked := env.Catalog.Blocked[obj]; blocked {
			r.Notes = append(r.Notes, fmt.Sprintf("tool %s is listed but blocked (%s): a call would not run whatever the policy says; its arguments were not checked", obj, why))
		} else if t, ok := env.Catalog.Tools[obj]; !ok {
			r.Why = fmt.Sprintf("tool %s is not in the catalog (%s lists %s): a call would answer tool_not_found", obj, server, listed(env.Catalog, server))
			return r
		} else if t.Check != nil {
			final, err := t.Check(req.Args)
			if err != nil {
				r.Got = Deny
				r.Why = "invalid_arguments: the tool's input schema refuses the arguments, so no condition is evaluated: " + err.Error()
				r.Pass = c.Expect == Deny && (c.Rule == "" || c.Rule == NoRule)
				return r
			}
			req.Args = final
		}
	}
	x := explain.Explain(env.Policy, req)
	d := env.Policy.Decide(req)
	r.Got, r.DecidedBy, r.Why = Deny, x.DecidedBy, x.Summary
	if d.Allowed {
		r.Got = Allow
		// The gateway's order: scopes after conditions, approvals after scopes.
		if sc := env.Policy.CheckScopes(req); len(sc.Missing) > 0 {
			r.Got, r.DecidedBy = InsufficientScope, sc.Rules
			r.Why = fmt.Sprintf("allowed by the policy, but the token lacks the scope %s that %s require: the gateway answers 403 insufficient_scope",
				strings.Join(sc.Missing, " "), strings.Join(sc.Rules, ", "))
		} else if rule, needed := env.Policy.ApprovalRule(req); needed {
			r.Got, r.DecidedBy = Approval, []string{rule}
		}
	}
	for _, l := range x.Lines {
		r.Lines = append(r.Lines, lineText(l))
	}
	for _, l := range x.ApprovalLines {
		r.Lines = append(r.Lines, lineText(l))
	}
	if req.Args == nil && env.Policy.ArgsMatter(sub, obj, req.Action) {
		r.Notes = append(r.Notes, "the case gives no args, and a matching line's condition reads them: it cannot be evaluated, which fails closed")
	}
	if len(x.DroppedRoles) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("roles %s are not roles of the policy and were ignored", strings.Join(x.DroppedRoles, ", ")))
	}
	r.Pass = r.Got == c.Expect && ruleMatches(env.expectedRule(c.Rule), r.DecidedBy)
	return r
}

func lineText(l explain.Line) string {
	s := l.Rule + " " + l.Text
	if l.CondResult != "" {
		s += "    [condition " + l.CondResult + "]"
	}
	switch {
	case l.Decisive:
		return "=> " + s
	case l.Applied:
		return " + " + s
	}
	return "   " + s
}

// listed names the catalog's tools of server, shortened.
func listed(cat *Catalog, server string) string {
	var ids []string
	for id := range cat.Tools {
		if strings.HasPrefix(id, server+"/") {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "no tools"
	}
	sort.Strings(ids)
	if len(ids) > 8 {
		return strings.Join(ids[:8], ", ") + fmt.Sprintf(" and %d more", len(ids)-8)
	}
	return strings.Join(ids, ", ")
}

// expectedRule is the case's rule with a name of PolicyAliases replaced by PolicyFile.
func (env Env) expectedRule(want string) string {
	if env.PolicyFile == "" || want == "" || want == NoRule {
		return want
	}
	file, line := splitRule(want)
	for _, alias := range env.PolicyAliases {
		if sameFile(alias, file) {
			return env.PolicyFile + ":" + line
		}
	}
	return want
}

// ruleMatches reports whether the expected rule is one of the deciding lines: "" expects
// nothing, "none" expects no line, and a file:line matches a deciding line with the same path, or
// whose path ends in the expected one at a directory boundary (policy.csv:12 matches
// /etc/toolgate/policy.csv:12).
func ruleMatches(want string, decided []string) bool {
	switch want {
	case "":
		return true
	case NoRule:
		return len(decided) == 0
	}
	wantFile, wantLine := splitRule(want)
	return slices.ContainsFunc(decided, func(d string) bool {
		file, line := splitRule(d)
		return line == wantLine && sameFile(file, wantFile)
	})
}

// sameFile reports whether want names file: the same path, or a tail of it at a directory
// boundary (policy.csv names /etc/toolgate/policy.csv).
func sameFile(file, want string) bool {
	file, want = filepath.ToSlash(file), filepath.ToSlash(want)
	return file == want || strings.HasSuffix(file, "/"+strings.TrimPrefix(want, "./"))
}

func splitRule(s string) (file, line string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// subject builds the case's subject: its principal (or the claims'), the roles it gives and the
// claims' roles, and attributes from the principal's API key, the claims, then the case.
func (env Env) subject(c *Case) (authz.Subject, error) {
	s := authz.Subject{Principal: c.Principal, Roles: append([]string(nil), c.Roles...), Attrs: map[string]string{}}
	if c.Claims != nil {
		if env.JWT == nil {
			return s, fmt.Errorf("the case gives claims, but the configuration accepts no JWTs (auth.jwt is not set)")
		}
		p, roles, attrs, err := env.JWT.subject(c.Claims)
		if err != nil {
			return s, err
		}
		if s.Principal == "" {
			s.Principal = p
		} else if p != "" && p != s.Principal {
			return s, fmt.Errorf("principal %q differs from the claims' principal %q (claim %s)", s.Principal, p, env.JWT.principalClaim())
		}
		s.Roles = append(s.Roles, roles...)
		for k, v := range attrs {
			s.Attrs[k] = v
		}
		scopes, err := authn.TokenScopes(c.Claims)
		if err != nil {
			return s, fmt.Errorf("%v; the gateway refuses such a token", err)
		}
		s.Scoped, s.Scopes = true, scopes
	}
	for k, v := range env.Attributes[s.Principal] {
		if _, set := s.Attrs[k]; !set {
			s.Attrs[k] = v
		}
	}
	for k, v := range c.Attributes {
		s.Attrs[k] = v
	}
	if s.Principal == "" {
		return s, fmt.Errorf("no principal: the claims have no %s claim", env.JWT.principalClaim())
	}
	return s, nil
}

func (j *JWT) principalClaim() string {
	if j == nil || j.PrincipalClaim == "" {
		return "sub"
	}
	return j.PrincipalClaim
}

// subject maps claims as package authn does: the principal claim (a string; a dotted name is a
// path into nested objects), the roles claim (a list of strings or one string of space-separated
// roles), and the attribute claims that hold strings.
func (j *JWT) subject(claims map[string]any) (principal string, roles []string, attrs map[string]string, err error) {
	if v, ok := claimValue(claims, j.principalClaim()); ok {
		s, isString := v.(string)
		if !isString {
			return "", nil, nil, fmt.Errorf("the principal claim %q is not a string", j.principalClaim())
		}
		principal = s
	}
	if j.RolesClaim != "" {
		if v, ok := claimValue(claims, j.RolesClaim); ok && v != nil {
			switch x := v.(type) {
			case string:
				roles = strings.Fields(x)
			case []any:
				for _, item := range x {
					s, isString := item.(string)
					if !isString {
						return "", nil, nil, fmt.Errorf("the roles claim %q holds a value that is not a string; the gateway refuses such a token", j.RolesClaim)
					}
					roles = append(roles, s)
				}
			default:
				return "", nil, nil, fmt.Errorf("the roles claim %q is neither a list of strings nor a string; the gateway refuses such a token", j.RolesClaim)
			}
		}
	}
	for _, name := range j.AttributeClaims {
		if s, ok := claims[name].(string); ok {
			if attrs == nil {
				attrs = map[string]string{}
			}
			attrs[name] = s
		}
	}
	return principal, roles, attrs, nil
}

// claimValue looks name up as a claim, then, if it has dots, as a path into nested objects.
func claimValue(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// known reports whether the configuration or the policy names principal.
func (env Env) known(principal string) bool {
	return slices.Contains(env.Principals, principal) || env.Policy.IsRole(principal) ||
		len(env.Policy.RolesOf(authz.Subject{Principal: principal})) > 0
}

// object is the case's canonical object.
func (env Env) object(c *Case) (string, error) {
	switch {
	case c.Resource != "":
		return c.Resource, nil
	case c.Prompt != "":
		return c.Prompt, nil
	}
	if env.ToolID != nil {
		return env.ToolID(c.Tool)
	}
	if !strings.Contains(c.Tool, "/") {
		return "", fmt.Errorf("tool %q: expected <server>/<tool>", c.Tool)
	}
	return c.Tool, nil
}

// Summary counts results.
type Summary struct{ Cases, Passed, Failed int }

// Summarize counts results.
func Summarize(results []Result) Summary {
	s := Summary{Cases: len(results)}
	for _, r := range results {
		if r.Pass {
			s.Passed++
		} else {
			s.Failed++
		}
	}
	return s
}

// Print writes one line per passing case (with verbose) and a block per failure: the case's name
// and line, what was expected, what was decided and by which line, why, and the matching lines.
func Print(w io.Writer, f *File, results []Result, verbose bool) {
	for _, r := range results {
		c := r.Case
		where := fmt.Sprintf("%s:%d", f.Path, c.Line)
		if r.Pass {
			if verbose {
				fmt.Fprintf(w, "ok    %s (%s): %s\n", c.Name, where, describe(r.Got, r.DecidedBy))
				for _, n := range r.Notes {
					fmt.Fprintf(w, "      note:     %s\n", n)
				}
			}
			continue
		}
		fmt.Fprintf(w, "FAIL  %s (%s)\n", c.Name, where)
		want := c.Expect
		if c.Rule != "" {
			want += " by " + c.Rule
		}
		fmt.Fprintf(w, "      expected: %s\n", want)
		if r.Got == "" {
			fmt.Fprintf(w, "      decided:  nothing: the case could not run\n")
		} else {
			fmt.Fprintf(w, "      decided:  %s\n", describe(r.Got, r.DecidedBy))
		}
		fmt.Fprintf(w, "      why:      %s\n", r.Why)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "      note:     %s\n", n)
		}
		if len(r.Lines) > 0 {
			fmt.Fprintf(w, "      lines matching %s %s:\n", c.action(), r.Object)
			for _, l := range r.Lines {
				fmt.Fprintf(w, "        %s\n", l)
			}
		}
	}
	s := Summarize(results)
	fmt.Fprintf(w, "%d case(s): %d passed, %d failed\n", s.Cases, s.Passed, s.Failed)
}

func describe(got string, decided []string) string {
	if len(decided) == 0 {
		return got + " (no line decided: denied by default)"
	}
	return got + " by " + strings.Join(decided, ", ")
}
