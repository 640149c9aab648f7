package authz

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// Options are what a policy load needs from the rest of the configuration.
type Options struct {
	// Servers are the configured upstream names (mcpServers). Every object must name one of
	// them ("<server>/<tool>", "<server>/*"). Empty skips that check (unit tests, tools that
	// have no configuration).
	Servers []string

	// Principals are the principals the configuration names: API-key principals,
	// auth.stdio_principal, auth.allow_anonymous. They count as principals, never roles (see
	// [Policy.IsRole]): a name only p lines mention is a role unless it is listed here. A listed
	// principal that a g line gives to someone as a role is a load error. Optional: without it,
	// a principal with p lines of its own must be on the left of a g line. [Store.SetPrincipals]
	// changes them while the policy is in force (a key reload).
	Principals []string

	skipRegexLint bool // tests only: let an invalid pattern through to reach Casbin
}

// rule is one loaded policy line.
type rule struct {
	ptype  string
	line   int
	text   string
	fields []string // without the ptype, padded to the model's size
	eft    string   // p lines
	cond   *condition
}

func ruleKey(ptype string, fields []string) string {
	return ptype + "\x00" + strings.Join(fields, "\x00")
}

// Policy is an immutable snapshot of one model and one policy file, linted and compiled: every
// condition is compiled once, here. It is safe for concurrent use; a policy change means loading
// a new Policy (see [Store]).
type Policy struct {
	modelPath, policyPath string
	version               string
	nrules                int
	info                  *modelInfo
	prules                []*rule             // p lines in file order (Casbin's order)
	arules                []*arule            // a (approval) lines in file order; never in Casbin
	srules                []*srule            // s (scope) lines in file order; never in Casbin
	byKey                 map[string]*rule    // ruleKey -> line, to name the line Casbin chose
	roles                 map[string][]string // g: member -> roles
	roleNames             map[string]bool     // see IsRole
	gEdges                []roleEdge          // the g lines, and
	subjects              map[string]bool     // the p lines' subjects, which roleNames is derived from
	principals            []string            // Options.Principals it was built with (see WithPrincipals)
	conds                 map[string]*condition
	denies                int
	warnings              []string
	se                    *casbin.SyncedEnforcer
	memo                  memo // answers already given (see memo.go)
}

// LoadPolicy reads, lints and compiles a Casbin model and a CSV policy.
//
// Every problem found is returned, as a *[LoadErrors] whose lines read "file:line: what is
// wrong; write X instead". The lint refuses, in the policy: a file whose last line has no
// newline (what a file cut while being saved looks like: "..., allow, amount <= 100" cut before
// ", amount" would be an unconditional allow); a policy without any p line (it would deny
// everything: an empty, commented-out or truncated file); effects other than exactly allow or
// deny; fields with leading or trailing whitespace; empty fields; "#" in a field (an inline
// comment) except inside a condition; "$" in any field (except the end anchor of a regexMatch
// pattern); regexMatch patterns that do not compile or are not anchored as ^...$; objects that
// do not name a server of o.Servers; unknown actions, unknown line types, wrong field counts and
// lines that are not valid CSV; conditions that do not compile; role cycles; role chains
// deeper than Casbin's 10 levels; a principal of o.Principals given as a role. In the model:
// anything but the repository's model (see checkModel): the request r = sub, obj, act, args,
// p = sub, obj, act, eft, cond, g = _, _, deny-override, and the matcher's exact structure.
//
// When the model itself is unusable, only the model's problems are reported. LoadPolicy never
// panics: a panic inside Casbin becomes an error carrying the stack (for the log).
//
// The files are read twice, before and after parsing, and must not change in between (a file
// being written is refused, not half-read); `toolgate check`, explain and the [Store] share
// every rule here, so check passes exactly what serve loads.
func LoadPolicy(modelPath, policyPath string, o Options) (p *Policy, err error) {
	return loadStable(modelPath, policyPath, o, nil)
}

// maxReadAttempts is how often loadStable reads the files before it gives up on files that keep
// changing.
const maxReadAttempts = 3

// loadStable reads both files, builds the policy from those bytes, reads them again, and returns
// the result only when both reads agree; otherwise it tries again, up to maxReadAttempts, and
// then refuses. between, when set (tests), runs between the build and the second read.
func loadStable(modelPath, policyPath string, o Options, between func()) (p *Policy, err error) {
	defer func() {
		if r := recover(); r != nil {
			p = nil
			err = fmt.Errorf("authz: loading %s and %s panicked: %v\n%s", modelPath, policyPath, r, debug.Stack())
		}
	}()
	for attempt := 1; ; attempt++ {
		modelText, policyText, err := readBoth(modelPath, policyPath)
		if err != nil {
			return nil, err
		}
		p, err = build(modelPath, modelText, policyPath, policyText, o)
		if between != nil {
			between()
		}
		m2, p2, err2 := readBoth(modelPath, policyPath)
		if err2 == nil && bytes.Equal(modelText, m2) && bytes.Equal(policyText, p2) {
			return p, err
		}
		if attempt == maxReadAttempts {
			return nil, &LoadErrors{Problems: []*LoadError{{File: policyPath,
				Reason: fmt.Sprintf("%s or %s changed while being read, %d times in a row (a save in progress?); write the files completely, then reload", modelPath, policyPath, attempt)}}}
		}
	}
}

func readBoth(modelPath, policyPath string) (modelText, policyText []byte, err error) {
	modelText, err = os.ReadFile(modelPath)
	if err != nil {
		return nil, nil, &LoadErrors{Problems: []*LoadError{{File: modelPath, Reason: readReason(err)}}}
	}
	policyText, err = os.ReadFile(policyPath)
	if err != nil {
		return nil, nil, &LoadErrors{Problems: []*LoadError{{File: policyPath, Reason: readReason(err)}}}
	}
	return modelText, policyText, nil
}

// problemNoNewline is the problem of a policy file whose last line has no newline.
const problemNoNewline = "the last line has no newline; the file may have been cut while being saved — finish the line and end it with a newline"

// problemNoPermissions is the problem of a policy without p lines.
const problemNoPermissions = "no permission (p) lines: the policy would deny everything, which is what an empty or truncated file looks like; refusing it. Write at least one p line (to deny everything on purpose: p, nobody, <server>/*, call, deny)"

func readReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("cannot read: %v", pe.Err)
	}
	return fmt.Sprintf("cannot read: %v", err)
}

// build is LoadPolicy after the files are read; panics are recovered by the caller.
func build(modelPath string, modelText []byte, policyPath string, policyText []byte, o Options) (*Policy, error) {
	ps := &problems{}
	m, err := model.NewModelFromString(string(modelText))
	if err != nil {
		ps.add(modelPath, 0, "invalid model: %v; start from the repository's model.conf", err)
		return nil, ps.err()
	}
	info := checkModel(modelPath, modelText, m, ps)
	if info == nil {
		return nil, ps.err()
	}

	lines, err := splitLines(policyText)
	if err != nil {
		ps.add(policyPath, 0, "%v", err)
		return nil, ps.err()
	}
	if len(policyText) > 0 && policyText[len(policyText)-1] != '\n' {
		ps.add(policyPath, 0, "%s", problemNoNewline)
	}
	p := &Policy{
		modelPath:  modelPath,
		policyPath: policyPath,
		version:    contentVersion(modelText, policyText),
		info:       info,
		byKey:      map[string]*rule{},
		roles:      map[string][]string{},
		conds:      map[string]*condition{},
	}
	lint := newLinter(policyPath, info, o, ps)
	var loaded []policyLine
	for _, pl := range lines {
		if isSkipped(pl.text) {
			continue
		}
		fields, cond, ok := lint.lineRule(pl)
		if !ok {
			continue
		}
		if fields[0] == approvalType {
			// Never handed to Casbin (its loader refuses a line type the model does not define):
			// a lines are evaluated by ApprovalRule.
			p.arules = append(p.arules, newARule(info, modelText, pl, fields, cond))
			continue
		}
		if fields[0] == scopeType {
			// Never handed to Casbin either: s lines are evaluated by CheckScopes.
			p.srules = append(p.srules, newSRule(info, pl, fields))
			continue
		}
		r := &rule{ptype: fields[0], line: pl.num, text: pl.text, fields: fields[1:], cond: cond}
		key := ruleKey(r.ptype, r.fields)
		if _, dup := p.byKey[key]; dup {
			continue // warned by the linter; Casbin would skip it too
		}
		p.byKey[key] = r
		pl.fields = fields
		loaded = append(loaded, pl)
		if r.ptype == "p" {
			r.eft = r.fields[info.pIndex["eft"]]
			if r.eft == effectDeny {
				p.denies++
			}
			if cond != nil {
				p.conds[cond.text] = cond
			}
			p.prules = append(p.prules, r)
		} else if r.ptype == "g" {
			p.roles[r.fields[0]] = append(p.roles[r.fields[0]], r.fields[1])
		}
	}
	lint.checkRoles()
	p.roleNames = lint.checkPrincipals()
	p.gEdges, p.subjects, p.principals = lint.edges["g"], lint.subjects, slices.Clone(o.Principals)
	if len(ps.list) == 0 && len(p.prules) == 0 {
		ps.add(policyPath, 0, "%s", problemNoPermissions)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	p.warnings = lint.warnings
	p.nrules = len(loaded)

	se, err := casbin.NewSyncedEnforcer(m, &bytesAdapter{file: policyPath, lines: loaded})
	if err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			return nil, &LoadErrors{Problems: []*LoadError{le}}
		}
		ps.add(policyPath, 0, "casbin refused the policy with this model (%s): %v", modelPath, err)
		return nil, ps.err()
	}
	// Before the first Enforce: Casbin caches the matcher compiled with the functions it has then.
	se.AddFunction(fnCond, condFunc)
	se.AddFunction(fnHasRole, hasRoleFunc)
	p.se = se
	return p, nil
}

// contentVersion is the first 12 hex digits of a SHA-256 over both files, each length-prefixed
// so that moving bytes from one file to the other changes the version.
func contentVersion(modelText, policyText []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, b := range [][]byte{modelText, policyText} {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Version is a short content hash of model+policy (SHA-256 hex, first 12 digits) for logs: two
// policies with the same version were loaded from byte-identical files.
func (p *Policy) Version() string {
	if p == nil {
		return ""
	}
	return p.version
}

// Rules is the number of rules (p and g lines) loaded, duplicates counted once. Approval (a)
// lines are counted by [Policy.Approvals].
func (p *Policy) Rules() int {
	if p == nil {
		return 0
	}
	return p.nrules
}

// Permissions is the number of p lines loaded (never 0: such a policy is refused).
func (p *Policy) Permissions() int {
	if p == nil {
		return 0
	}
	return len(p.prules)
}

// Denies is the number of deny lines loaded.
func (p *Policy) Denies() int {
	if p == nil {
		return 0
	}
	return p.denies
}

// Warnings are "file:line: ..." notes about lines that load but are probably not what the admin
// meant: a rule repeated (removing one copy would not revoke it), a role that grants nothing
// (often a typo). [Store] logs them at Warn on every load.
func (p *Policy) Warnings() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.warnings...)
}

// ref names a rule as "file:line".
func (p *Policy) ref(r *rule) string {
	return fmt.Sprintf("%s:%d", p.policyPath, r.line)
}

// roleClosure is every name reachable from names through g lines within Casbin's depth limit,
// names included.
func (p *Policy) roleClosure(names ...string) map[string]bool {
	out := map[string]bool{}
	frontier := []string{}
	for _, n := range names {
		if n != "" && !out[n] {
			out[n] = true
			frontier = append(frontier, n)
		}
	}
	for level := 0; level < maxRoleDepth && len(frontier) > 0; level++ {
		var next []string
		for _, n := range frontier {
			for _, r := range p.roles[n] {
				if !out[r] {
					out[r] = true
					next = append(next, r)
				}
			}
		}
		frontier = next
	}
	return out
}

// IsRole reports whether name is a role in this policy. The rule, from the policy's own lines
// (and Options.Principals):
//
//   - a PRINCIPAL name is one on the left of a g line and never on the right of one ("g, alice,
//     support_agent": alice), or one listed in Options.Principals;
//   - a ROLE is every other name the policy mentions: the right side of any g line
//     (support_agent; a role that inherits another, "g, supervisor, support_agent", is on both
//     sides and is a role), and the subject of any p line that is not a principal name (a role
//     only credentials grant, "p, auditor, orders/*, call, allow" with auditor in a JWT roles
//     claim).
//
// The two sets never overlap. A name the policy does not mention is neither (an unknown
// principal, denied unless a credential role grants something).
//
// Casbin treats a name as a member of itself (g(x, x) is true), so a principal named like a
// role would hold that role's lines: [Policy.Decide], [Policy.Visible] and [Policy.Trace] deny
// a Subject.Principal that IsRole, with [ErrPrincipalIsRole] (for the log). Subject.Roles values
// that are not roles (principal names, unknown names) are dropped. `toolgate check` and startup
// should check every configured principal (API keys, stdio, anonymous) with IsRole, or pass them
// as Options.Principals.
func (p *Policy) IsRole(name string) bool {
	return p != nil && p.roleNames[name]
}

// WithPrincipals is this policy with principals as its configured principals (Options.Principals)
// in place of those it was loaded with: the same files, rules, version and enforcer, with what
// [Policy.IsRole] derives from the principals computed again, and nothing remembered (see memo.go),
// so a name that only p lines mention becomes a principal when it is configured, and a role
// again when it no longer is. It is what a load of the same files with these principals would
// give, without reading them: a principal that a g line gives as a role is refused with the same
// problem (a *[LoadErrors]), and p is unchanged. The gateway calls it (through
// [Store.SetPrincipals]) when a key reload changes the configured principals.
func (p *Policy) WithPrincipals(principals []string) (*Policy, error) {
	roles, given := roleNames(principals, p.gEdges, p.subjects)
	if len(given) > 0 {
		ps := &problems{}
		for _, e := range given {
			ps.add(p.policyPath, e.line, problemPrincipalIsRole, e.role)
		}
		return nil, ps.err()
	}
	// Every field but the memo (fresh) and what the principals decide (TestWithPrincipalsCopiesEveryField).
	return &Policy{
		modelPath: p.modelPath, policyPath: p.policyPath, version: p.version, nrules: p.nrules, info: p.info,
		prules: p.prules, arules: p.arules, srules: p.srules, byKey: p.byKey, roles: p.roles, conds: p.conds, denies: p.denies,
		warnings: p.warnings, se: p.se, gEdges: p.gEdges, subjects: p.subjects,
		roleNames: roles, principals: slices.Clone(principals),
	}, nil
}

// Principals are the configured principals this policy was built with (Options.Principals, or
// those of [Policy.WithPrincipals]).
func (p *Policy) Principals() []string { return slices.Clone(p.principals) }

// ErrPrincipalIsRole is the Internal error of a decision whose principal is the name of a role
// in the policy (see [Policy.IsRole]). For the log only.
var ErrPrincipalIsRole = errors.New("authz: the principal is the name of a role in the policy")

func (p *Policy) principalIsRole(principal string) error {
	if !p.IsRole(principal) {
		return nil
	}
	return fmt.Errorf("%w: principal %q is a role in %s, and a principal named like a role would hold that role's lines; denied (rename the principal or the role)",
		ErrPrincipalIsRole, principal, p.policyPath)
}

// acceptRoles splits the credential's roles into the roles of this policy (kept, sorted, without
// duplicates) and the rest (dropped, sorted): principal names and names the policy does not
// know. A credential must not make its bearer a member of a principal (a roles claim ["carol"]
// would otherwise give carol's roles).
func (p *Policy) acceptRoles(roles []string) (kept, dropped []string) {
	seen := map[string]bool{}
	for _, r := range roles {
		if seen[r] {
			continue
		}
		seen[r] = true
		if p.IsRole(r) {
			kept = append(kept, r)
		} else {
			dropped = append(dropped, r)
		}
	}
	sort.Strings(kept)
	sort.Strings(dropped)
	return kept, dropped
}

// resolveRoles returns the subject's roles (through g lines and from the credential's accepted
// roles), sorted and without the principal itself; the set hasRole answers from (the accepted
// credential roles and everything they inherit); and the credential roles dropped.
func (p *Policy) resolveRoles(s Subject) (all []string, cred map[string]bool, dropped []string) {
	kept, dropped := p.acceptRoles(s.Roles)
	cred = p.roleClosure(kept...)
	set := p.roleClosure(s.Principal)
	for r := range cred {
		set[r] = true
	}
	delete(set, s.Principal)
	for r := range set {
		all = append(all, r)
	}
	sort.Strings(all)
	return all, cred, dropped
}

// callCtx is what r.args carries into the matcher for one decision: the request, the
// credential's roles, and the arguments, decoded once on first use. One decision runs on one
// goroutine, so it needs no lock.
type callCtx struct {
	p       *Policy
	req     Request
	visible bool // asking "with some arguments?" rather than deciding one call
	cred    map[string]bool
	roles   []string
	dropped []string // credential roles that are not roles of the policy

	envReady bool
	env      map[string]any
	argsErr  error
	condErr  error // the first condition error met, for the log
}

func (p *Policy) newCtx(req Request, visible bool) *callCtx {
	c := &callCtx{p: p, req: req, visible: visible}
	c.roles, c.cred, c.dropped = p.resolveRoles(req.Subject)
	return c
}

// environment builds what conditions see: args (and each argument by its bare name) and
// principal (name, roles, and the subject's attributes).
func (c *callCtx) environment() {
	if c.envReady {
		return
	}
	c.envReady = true
	principal := map[string]any{}
	for k, v := range c.req.Subject.Attrs {
		principal[k] = v
	}
	roles := make([]any, len(c.roles))
	for i, r := range c.roles {
		roles[i] = r
	}
	principal["name"] = c.req.Subject.Principal
	principal["roles"] = roles
	args, err := decodeArgs(c.req.Args)
	if err != nil {
		c.argsErr = err
		args = map[string]any{}
	}
	c.env = map[string]any{"args": args, "principal": principal}
}

// evalCond evaluates a compiled condition for this call.
func (c *callCtx) evalCond(cond *condition) (bool, error) {
	c.environment()
	if cond.usesArgs && c.argsErr != nil {
		return false, c.argsErr
	}
	return cond.eval(c.env)
}

// condApplies is cond(r.args, p.cond, p.eft): whether a line whose subject, object and action
// matched takes part in the decision. No condition: always. A condition that cannot be evaluated
// fails closed per effect: an allow line does not apply, a deny line does. When asking about
// visibility, an allow line applies when some arguments may make its condition true, and a deny
// line when no arguments can make it false (see visible.go): a condition on the principal alone
// is evaluated, one on arguments is assumed to go either way unless what it reads of the
// principal already decides it.
func (c *callCtx) condApplies(text, eft string) bool {
	if text == "" {
		return true
	}
	cond := c.p.conds[text]
	if cond == nil {
		c.noteErr(fmt.Errorf("condition %q was not compiled at load", text))
		return eft == effectDeny
	}
	if c.visible {
		c.environment()
		o := cond.vis.eval(c.env, c.env["principal"].(map[string]any))
		if eft == effectAllow {
			return o&oTrue != 0
		}
		return o&oFalse == 0
	}
	ok, err := c.evalCond(cond)
	if err != nil {
		c.noteErr(fmt.Errorf("condition %q: %w", text, err))
		return eft == effectDeny
	}
	return ok
}

func (c *callCtx) noteErr(err error) {
	if c.condErr == nil {
		c.condErr = err
	}
}

// condFunc is the matcher's cond(r.args, p.cond, p.eft).
func condFunc(args ...any) (any, error) {
	if len(args) != 3 {
		return false, fmt.Errorf("%s needs 3 arguments (r.args, p.cond, p.eft), got %d", fnCond, len(args))
	}
	c, ok := args[0].(*callCtx)
	if !ok {
		return false, fmt.Errorf("%s: first argument is a %T, not the request's args", fnCond, args[0])
	}
	text, _ := args[1].(string)
	eft, _ := args[2].(string)
	return c.condApplies(text, eft), nil
}

// hasRoleFunc is the matcher's hasRole(r.args, p.sub): the credential grants p.sub for this
// request, directly or through g lines.
func hasRoleFunc(args ...any) (any, error) {
	if len(args) != 2 {
		return false, fmt.Errorf("%s needs 2 arguments (r.args, p.sub), got %d", fnHasRole, len(args))
	}
	c, ok := args[0].(*callCtx)
	if !ok {
		return false, fmt.Errorf("%s: first argument is a %T, not the request's args", fnHasRole, args[0])
	}
	sub, _ := args[1].(string)
	return c.cred[sub], nil
}

// ErrNoPolicy is the Internal error of a decision asked of a nil Policy (or a Store that never
// loaded one). For the log only.
var ErrNoPolicy = errors.New("authz: no policy loaded")

// enforce asks Casbin, with panics recovered. rvals follow the model's request definition.
func (p *Policy) enforce(c *callCtx) (ok bool, explain []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, explain = false, nil
			err = fmt.Errorf("authz: enforce panicked: %v\n%s", r, debug.Stack())
		}
	}()
	ok, explain, err = p.se.EnforceEx(c.req.Subject.Principal, c.req.Object, c.req.Action, c)
	if err != nil {
		return false, nil, fmt.Errorf("authz: enforce(%q, %q, %q): %w", c.req.Subject.Principal, c.req.Object, c.req.Action, err)
	}
	return ok, explain, nil
}

// Decide answers one call: may req.Subject perform req.Action ("call") on req.Object (the
// canonical "<server>/<tool>" from the catalog, never a client string) with req.Args?
//
// A p line applies when its subject is the principal, a role the principal has through g lines,
// or a role the credential grants (Subject.Roles that are roles of the policy, and what those
// inherit through g lines; other values are dropped, see [Policy.IsRole]); its object matches;
// its action is the same; and its condition holds on req.Args (a condition that cannot be
// evaluated fails closed: the allow line does not apply, the deny line does). Deny overrides
// allow across all of them, and anything not allowed is denied. Unknown principals are denied,
// as is any request with an empty principal, object or action, and a principal that is the
// name of a role (Internal is then [ErrPrincipalIsRole]).
//
// When Casbin fails to evaluate (an invalid regex that got past the lint, a panic), the answer
// is deny with the cause in Internal, for the LOG only: it can carry a goroutine stack. A
// condition that could not be evaluated is not an internal error; the first one is in CondErr.
// Rule names the line that decided ("policy.csv:12"): the first matching deny, else the first
// matching allow, else "" (nothing allowed it).
func (p *Policy) Decide(req Request) Decision {
	if p == nil || p.se == nil {
		return Decision{Internal: ErrNoPolicy}
	}
	if req.Subject.Principal == "" || req.Object == "" || req.Action == "" {
		return Decision{}
	}
	if p.conditionMayApply(req.Object, req.Action) {
		return p.decide(req)
	}
	key := memoKey("d", req.Subject, req.Object, req.Action)
	if v, ok := p.memo.load(key); ok {
		return v.(Decision)
	}
	d := p.decide(req)
	if d.Internal == nil && d.CondErr == nil {
		p.memo.store(key, d)
	}
	return d
}

// decide is Decide without the memo.
func (p *Policy) decide(req Request) Decision {
	if err := p.principalIsRole(req.Subject.Principal); err != nil {
		return Decision{Internal: err}
	}
	c := p.newCtx(req, false)
	ok, explain, err := p.enforce(c)
	d := Decision{Allowed: ok, Internal: err, CondErr: c.condErr}
	if err == nil && len(explain) > 0 {
		if r := p.byKey[ruleKey("p", explain)]; r != nil {
			d.Rule = p.ref(r)
		}
	}
	return d
}

// Visible reports whether s could call obj with SOME arguments, for tools/list: a conditional
// allow line counts when some arguments may satisfy it, and only deny lines that apply whatever
// the arguments hide a tool. What a condition reads of the principal is evaluated (see
// visible.go): "region == principal.region" does not list the tool for a principal without a
// region attribute. A tool that is visible may still be denied for particular arguments by
// [Policy.Decide]. A principal that is the name of a role sees nothing.
func (p *Policy) Visible(s Subject, obj string) bool {
	ok, _ := p.visibleAct(s, obj, ActCall)
	return ok
}

// VisibleAct is Visible for another action: whether s may ever act on obj
// (read a resource, get a prompt), which decides what its lists show.
func (p *Policy) VisibleAct(s Subject, obj, act string) bool {
	ok, _ := p.visibleAct(s, obj, act)
	return ok
}

func (p *Policy) visibleAct(s Subject, obj, act string) (bool, error) {
	if p == nil || p.se == nil {
		return false, ErrNoPolicy
	}
	key := memoKey("v", s, obj, act)
	if v, ok := p.memo.load(key); ok {
		return v.(bool), nil
	}
	ok, err := p.visibleUncached(s, obj, act)
	if err == nil {
		p.memo.store(key, ok)
	}
	return ok, err
}

func (p *Policy) visibleUncached(s Subject, obj, act string) (bool, error) {
	if p == nil || p.se == nil {
		return false, ErrNoPolicy
	}
	if s.Principal == "" || obj == "" {
		return false, nil
	}
	if err := p.principalIsRole(s.Principal); err != nil {
		return false, err
	}
	c := p.newCtx(Request{Subject: s, Object: obj, Action: act}, true)
	ok, _, err := p.enforce(c)
	return ok, err
}

// RolesOf are every role s has for this request: through g lines (and
// their inheritance) and the roles its credential grants that are roles of
// the policy. Rate limits per role read it.
func (p *Policy) RolesOf(s Subject) []string {
	if p == nil {
		return nil
	}
	all, _, _ := p.resolveRoles(s)
	return all
}
