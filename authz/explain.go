package authz

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/util"
	"github.com/casbin/govaluate"
)

// Explanation is why [Policy.Decide] answers what it answers, for `toolgate explain` and for an
// admin reading a denial in the log. Allowed always equals Decide(req).Allowed for the same
// request (pinned by a test over a matrix of subjects, objects and arguments).
type Explanation struct {
	Principal string
	Object    string
	Action    string
	Allowed   bool
	// Visible: the subject could call the object with some arguments (tools/list shows it).
	Visible bool
	// Roles are the roles the decision used: the principal's through g lines, and the
	// credential's accepted roles (CredentialRoles that are roles of the policy), with what
	// those inherit; sorted, the principal itself left out. They are also what principal.roles
	// holds in conditions. Empty when the principal is the name of a role (denied).
	Roles []string
	// CredentialRoles are Subject.Roles as the credential gave them.
	CredentialRoles []string
	// DroppedRoles are the CredentialRoles the decision ignored, sorted: names that are not
	// roles of the policy (principal names, unknown names; see [Policy.IsRole]).
	DroppedRoles []string
	// Lines are every p line whose subject, object and action match this request, in file order,
	// whether or not its condition held.
	Lines []ExplainedLine
	// DecidedBy are the line(s) that decided, "file:line": every deny line that applied, else
	// every allow line that applied. Empty when nothing applied (denied by default).
	DecidedBy []string
	// ApprovalLines are every approval (a) line whose subject, object and action match this
	// request, in file order, whether or not its condition held (Effect "approval"; Applied: its
	// condition held or could not be evaluated, which fails closed; Decisive: it is Approval).
	ApprovalLines []ExplainedLine
	// Approval is the a line ("file:line") that makes this allowed call need a human approval,
	// as [Policy.ApprovalRule] answers; "" when none applies or the call is denied (an approval
	// never turns a deny into an allow).
	Approval string
	// Summary is one sentence for a human.
	Summary string
	// Internal is an evaluation failure (for the log only, as in Decision); Allowed is false.
	Internal error
}

// ExplainedLine is one p line that matched the request's subject, object and action.
type ExplainedLine struct {
	Rule      string // "file:line"
	Text      string // the line as written
	Effect    string // allow or deny; "approval" for an a line (Explanation.ApprovalLines)
	Condition string // "" when the line has none
	// CondResult is "" (no condition), "true", "false", or "error: ..." (fails closed: an allow
	// line does not apply, a deny line does).
	CondResult string
	Applied    bool // took part in the decision
	Decisive   bool // one of DecidedBy
}

// walkParams feeds one policy line and the request to the matcher, as Casbin does.
type walkParams struct {
	r      map[string]any
	pNames []string
	pVals  []string
}

func (w *walkParams) Get(name string) (any, error) {
	if v, ok := w.r[name]; ok {
		return v, nil
	}
	for i, n := range w.pNames {
		if n == name {
			return w.pVals[i], nil
		}
	}
	return nil, fmt.Errorf("no parameter %q", name)
}

// matcherFor compiles the model's matcher (the string Casbin evaluates) with Casbin's built-in
// functions, this policy's role managers, and the given cond.
func (p *Policy) matcherFor(cond govaluate.ExpressionFunction) (*govaluate.EvaluableExpression, error) {
	fm := model.LoadFunctionMap()
	fns := fm.GetFunctions()
	for key, ast := range p.se.GetModel()["g"] {
		if ast.RM != nil {
			fns[key] = util.GenerateGFunction(ast.RM)
		}
	}
	fns[fnCond] = cond
	fns[fnHasRole] = hasRoleFunc
	return govaluate.NewEvaluableExpressionWithFunctions(p.info.matcher, fns)
}

func evalMatch(e *govaluate.EvaluableExpression, params govaluate.Parameters) (bool, error) {
	v, err := e.Eval(params)
	if err != nil {
		return false, err
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case float64:
		return x != 0, nil
	}
	return false, fmt.Errorf("matcher result is a %T, not a boolean", v)
}

func alwaysTrue(...any) (any, error) { return true, nil }

// Explain evaluates the model's matcher on every p line, one at a time, and reports which lines
// matched, how their conditions came out, and which decided. It evaluates the same matcher text
// with the same functions as Casbin does in Decide, but line by line and without stopping at the
// first deny, so that it can list every line. It is slower than Decide; use it for admins, not
// per call.
func (p *Policy) Explain(req Request) (x Explanation) {
	x = Explanation{Principal: req.Subject.Principal, Object: req.Object, Action: req.Action,
		CredentialRoles: append([]string(nil), req.Subject.Roles...)}
	if p == nil || p.se == nil {
		x.Internal = errNoPolicy
		x.Summary = "denied: no policy is loaded"
		return x
	}
	if req.Subject.Principal == "" || req.Object == "" || req.Action == "" {
		x.Summary = "denied: the principal, the object and the action must all be given"
		return x
	}
	if err := p.principalIsRole(req.Subject.Principal); err != nil {
		x.Internal = err
		x.Summary = fmt.Sprintf("denied: the principal %q is the name of a role in the policy, and a principal may not be named like a role (it would hold the role's lines); rename the principal or the role", req.Subject.Principal)
		return x
	}
	defer func() {
		if r := recover(); r != nil {
			x.Allowed = false
			x.Internal = fmt.Errorf("authz: explain panicked: %v\n%s", r, debug.Stack())
			x.Summary = "denied: the policy could not be evaluated (internal error)"
		}
	}()

	c := p.newCtx(req, false)
	x.Roles = c.roles
	x.DroppedRoles = c.dropped
	if req.Action == ActCall {
		x.Visible, _ = p.visible(req.Subject, req.Object)
	}
	real, err := p.matcherFor(condFunc)
	if err == nil {
		var stub *govaluate.EvaluableExpression
		stub, err = p.matcherFor(alwaysTrue)
		if err == nil {
			err = p.walk(&x, c, real, stub)
		}
	}
	if err == nil {
		p.explainApprovals(&x, c)
	}
	if err != nil {
		x.Allowed = false
		x.Internal = fmt.Errorf("authz: explain(%q, %q, %q): %w", req.Subject.Principal, req.Object, req.Action, err)
		x.Summary = "denied: the policy could not be evaluated (internal error)"
		return x
	}
	return x
}

func (p *Policy) walk(x *Explanation, c *callCtx, real, stub *govaluate.EvaluableExpression) error {
	params := &walkParams{r: map[string]any{}}
	vals := []any{c.req.Subject.Principal, c.req.Object, c.req.Action, c}
	for i, t := range p.info.rTokens {
		params.r[t] = vals[i]
	}
	for _, n := range p.info.pNames {
		params.pNames = append(params.pNames, "p_"+n)
	}

	var denies, allows []int
	for _, r := range p.prules {
		params.pVals = r.fields
		matched, err := evalMatch(stub, params)
		if err != nil {
			return fmt.Errorf("%s: %w", p.ref(r), err)
		}
		applied, err := evalMatch(real, params)
		if err != nil {
			return fmt.Errorf("%s: %w", p.ref(r), err)
		}
		if !matched && !applied {
			continue
		}
		l := ExplainedLine{Rule: p.ref(r), Text: r.text, Effect: r.eft, Applied: applied}
		if r.cond != nil {
			l.Condition = r.cond.text
			ok, err := c.evalCond(r.cond)
			switch {
			case err != nil:
				l.CondResult = "error: " + err.Error()
			default:
				l.CondResult = fmt.Sprint(ok)
			}
		}
		if applied {
			switch r.eft {
			case effectDeny:
				denies = append(denies, len(x.Lines))
			case effectAllow:
				allows = append(allows, len(x.Lines))
			}
		}
		x.Lines = append(x.Lines, l)
	}

	decisive := allows
	x.Allowed = len(denies) == 0 && len(allows) > 0
	if len(denies) > 0 {
		decisive = denies
	}
	for _, i := range decisive {
		x.Lines[i].Decisive = true
		x.DecidedBy = append(x.DecidedBy, x.Lines[i].Rule)
	}
	switch {
	case len(denies) > 0:
		x.Summary = fmt.Sprintf("denied by %s (a deny line wins over every allow)", strings.Join(x.DecidedBy, ", "))
	case x.Allowed:
		x.Summary = fmt.Sprintf("allowed by %s", strings.Join(x.DecidedBy, ", "))
	case len(x.Lines) > 0:
		x.Summary = "denied: lines match this tool, but no allow line's condition holds for these arguments"
	default:
		x.Summary = "denied: no line allows it (anything not allowed is denied)"
	}
	if len(c.dropped) > 0 {
		x.Summary += fmt.Sprintf("; the credential's roles %s were ignored (not roles of this policy)", strings.Join(c.dropped, ", "))
	}
	return nil
}
