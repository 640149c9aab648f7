package authz

import (
	"fmt"
	"runtime/debug"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/util"
	"github.com/casbin/govaluate"
)

// Trace is how every policy line that matches a request's subject, object and action came out,
// one line at a time: what [Policy.Decide] combines into one answer. It is for people: package
// authz/explain turns it into the answer of `toolgate explain`. The call path never builds one.
type Trace struct {
	// Roles are the roles the decision used: the principal's through g lines, and the
	// credential's accepted roles (Subject.Roles that are roles of the policy), with what those
	// inherit; sorted, the principal itself left out. They are also what principal.roles holds
	// in conditions.
	Roles []string
	// DroppedRoles are the Subject.Roles the decision ignores, sorted: names that are not roles
	// of the policy (principal names, unknown names; see [Policy.IsRole]).
	DroppedRoles []string
	// Lines are every p line whose subject, object and action match the request, in file order,
	// whether or not its condition held.
	Lines []TracedLine
	// ApprovalLines are every approval (a) line whose subject, object and action match the
	// request, in file order, whether or not its condition held.
	ApprovalLines []TracedLine
}

// TracedLine is one policy line that matched a request's subject, object and action.
type TracedLine struct {
	Rule      string // "file:line"
	Text      string // the line as written
	Effect    string // allow or deny; "approval" for an a line
	Condition string // "" when the line has none
	// CondResult is "" (no condition), "true", "false", or "error: ..." (fails closed: an allow
	// line does not apply, a deny line and an a line do).
	CondResult string
	// Applied: the line takes part in the answer. Deny overrides allow: a request is allowed
	// when an allow line applies and no deny line does, exactly as Decide answers. An a line
	// that applies makes an allowed call need a human approval ([Policy.ApprovalRule] names the
	// first).
	Applied bool
}

// Trace evaluates the model's matcher on every p line, one at a time, and every a line, and
// reports each line whose subject, object and action match, with how its condition came out. It
// evaluates the same matcher text with the same functions as Casbin does in Decide, but line by
// line and without stopping at the first deny, so that it can list every line. It is slower than
// Decide and memoizes nothing: use it for people, never per call.
//
// Errors are those of Decide's Internal: [ErrNoPolicy], [ErrPrincipalIsRole], or an evaluation
// failure (for the log only; the trace is then incomplete). A request with an empty principal,
// object or action, which Decide denies, has an empty trace.
func (p *Policy) Trace(req Request) (t Trace, err error) {
	if p == nil || p.se == nil {
		return t, ErrNoPolicy
	}
	if req.Subject.Principal == "" || req.Object == "" || req.Action == "" {
		return t, nil
	}
	if err := p.principalIsRole(req.Subject.Principal); err != nil {
		return t, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("authz: trace panicked: %v\n%s", r, debug.Stack())
		}
	}()
	c := p.newCtx(req, false)
	t.Roles, t.DroppedRoles = c.roles, c.dropped
	real, err := p.matcherFor(condFunc)
	if err == nil {
		var stub *govaluate.EvaluableExpression
		stub, err = p.matcherFor(alwaysTrue)
		if err == nil {
			t.Lines, err = p.walk(c, real, stub)
		}
	}
	if err != nil {
		return t, fmt.Errorf("authz: trace(%q, %q, %q): %w", req.Subject.Principal, req.Object, req.Action, err)
	}
	t.ApprovalLines = p.traceApprovals(c)
	return t, nil
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

// walk evaluates the matcher on each p line twice: with the real cond (does the line apply?)
// and with a cond that always holds (do its subject, object and action match?).
func (p *Policy) walk(c *callCtx, real, stub *govaluate.EvaluableExpression) ([]TracedLine, error) {
	params := &walkParams{r: map[string]any{}}
	vals := []any{c.req.Subject.Principal, c.req.Object, c.req.Action, c}
	for i, t := range p.info.rTokens {
		params.r[t] = vals[i]
	}
	for _, n := range p.info.pNames {
		params.pNames = append(params.pNames, "p_"+n)
	}

	var lines []TracedLine
	for _, r := range p.prules {
		params.pVals = r.fields
		matched, err := evalMatch(stub, params)
		if err != nil {
			return lines, fmt.Errorf("%s: %w", p.ref(r), err)
		}
		applied, err := evalMatch(real, params)
		if err != nil {
			return lines, fmt.Errorf("%s: %w", p.ref(r), err)
		}
		if !matched && !applied {
			continue
		}
		l := TracedLine{Rule: p.ref(r), Text: r.text, Effect: r.eft, Applied: applied}
		if r.cond != nil {
			l.Condition = r.cond.text
			l.CondResult = condResult(c.evalCond(r.cond))
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// traceApprovals lists the a lines matching the request's subject, object and action.
func (p *Policy) traceApprovals(c *callCtx) []TracedLine {
	subjects := p.roleClosure(c.req.Subject.Principal)
	var lines []TracedLine
	for _, a := range p.arules {
		if !a.matches(c, subjects) {
			continue
		}
		ok, err := a.applies(c)
		l := TracedLine{Rule: p.aref(a), Text: a.text, Effect: "approval", Applied: ok}
		if a.cond != nil {
			l.Condition = a.cond.text
			l.CondResult = condResult(ok, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// condResult is a TracedLine's CondResult for a condition that was evaluated.
func condResult(ok bool, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(ok)
}
