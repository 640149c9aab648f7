// Package explain says why the policy answers what it answers, for `toolgate explain`: which
// lines matched a request, how their conditions came out, which decided, and one sentence for a
// human.
//
// # Why a package of its own
//
// Package authz is the policy decision, and the gateway's call path imports nothing else of
// authorization. This package is the one part of the policy tooling that the gateway never
// runs, so it lives beside authz rather than in it. Its name is what it does: it explains; it
// does not lint.
//
// The policy checks (authz/lint.go, model.go, policyfile.go) stay in authz, although `toolgate
// check` is their best-known user: they are part of loading. [authz.LoadPolicy] applies every
// one of them, so a Store refuses at startup, and on every reload (keeping the policy in force),
// exactly what check refuses, and the same pass parses the lines, compiles the conditions and
// finds the roles that decisions use. authz/strict.go is not a check at all: it is how
// conditions compare values, on every call.
//
// # Agreement with the decision
//
// authz keeps the line-by-line evaluation ([authz.Policy.Trace]), beside Decide and with the
// same matcher, role resolution and conditions. This package reads the trace with the model's
// one policy effect, deny-override (the only effect authz's model check accepts): a request is
// allowed when an allow line applies and no deny line does. [Explanation.Allowed] therefore
// always equals Decide's answer, which explain_test.go checks over a matrix of subjects, objects
// and arguments.
package explain

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/authz"
)

// Explanation is why [authz.Policy.Decide] answers what it answers. Allowed always equals
// Decide(req).Allowed for the same request.
type Explanation struct {
	Principal string
	Object    string
	Action    string
	Allowed   bool
	// Visible: the subject could call the object with some arguments (tools/list shows it).
	Visible bool
	// Roles are the roles the decision used (see [authz.Trace]); empty when the principal is
	// the name of a role (denied).
	Roles []string
	// CredentialRoles are Subject.Roles as the credential gave them.
	CredentialRoles []string
	// DroppedRoles are the CredentialRoles the decision ignored, sorted: names that are not
	// roles of the policy (principal names, unknown names; see [authz.Policy.IsRole]).
	DroppedRoles []string
	// Lines are every p line whose subject, object and action match this request, in file order,
	// whether or not its condition held.
	Lines []Line
	// DecidedBy are the line(s) that decided, "file:line": every deny line that applied, else
	// every allow line that applied. Empty when nothing applied (denied by default).
	DecidedBy []string
	// ApprovalLines are every approval (a) line whose subject, object and action match this
	// request, in file order, whether or not its condition held (Effect "approval"; Applied: its
	// condition held or could not be evaluated, which fails closed; Decisive: it is Approval).
	ApprovalLines []Line
	// Approval is the a line ("file:line") that makes this allowed call need a human approval,
	// as [authz.Policy.ApprovalRule] answers; "" when none applies or the call is denied (an
	// approval never turns a deny into an allow).
	Approval string
	// Summary is one sentence for a human.
	Summary string
	// Internal is an evaluation failure (for the log only, as in authz.Decision); Allowed is
	// false.
	Internal error
}

// Line is one policy line that matched the request's subject, object and action.
type Line struct {
	authz.TracedLine
	Decisive bool // one of DecidedBy, or the a line named by Approval
}

// Explain answers req as p would, with the reasons. It is slower than Decide; use it for people,
// not per call.
func Explain(p *authz.Policy, req authz.Request) Explanation {
	x := Explanation{Principal: req.Subject.Principal, Object: req.Object, Action: req.Action,
		CredentialRoles: append([]string(nil), req.Subject.Roles...)}
	t, err := p.Trace(req)
	switch {
	case errors.Is(err, authz.ErrNoPolicy):
		x.Internal = err
		x.Summary = "denied: no policy is loaded"
		return x
	case req.Subject.Principal == "" || req.Object == "" || req.Action == "":
		x.Summary = "denied: the principal, the object and the action must all be given"
		return x
	case errors.Is(err, authz.ErrPrincipalIsRole):
		x.Internal = err
		x.Summary = fmt.Sprintf("denied: the principal %q is the name of a role in the policy, and a principal may not be named like a role (it would hold the role's lines); rename the principal or the role", req.Subject.Principal)
		return x
	}
	x.Roles, x.DroppedRoles = t.Roles, t.DroppedRoles
	if req.Action == authz.ActCall {
		x.Visible = p.Visible(req.Subject, req.Object)
	}
	if err != nil {
		x.Internal = err
		x.Summary = "denied: the policy could not be evaluated (internal error)"
		return x
	}
	decide(&x, t.Lines)
	approvals(&x, t.ApprovalLines)
	return x
}

// decide combines the p lines as deny-override does, and says so.
func decide(x *Explanation, traced []authz.TracedLine) {
	var denies, allows []int
	for _, tl := range traced {
		if tl.Applied {
			switch tl.Effect {
			case "deny":
				denies = append(denies, len(x.Lines))
			case "allow":
				allows = append(allows, len(x.Lines))
			}
		}
		x.Lines = append(x.Lines, Line{TracedLine: tl})
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
	if len(x.DroppedRoles) > 0 {
		x.Summary += fmt.Sprintf("; the credential's roles %s were ignored (not roles of this policy)", strings.Join(x.DroppedRoles, ", "))
	}
}

// approvals lists the a lines, and sets Approval (and says so in the Summary) when the call is
// allowed and one applies: the first in file order, as ApprovalRule answers.
func approvals(x *Explanation, traced []authz.TracedLine) {
	first := ""
	for _, tl := range traced {
		l := Line{TracedLine: tl}
		if tl.Applied && first == "" {
			first = tl.Rule
			l.Decisive = x.Allowed
		}
		x.ApprovalLines = append(x.ApprovalLines, l)
	}
	if !x.Allowed || first == "" {
		return
	}
	x.Approval = first
	note := fmt.Sprintf(", but needs approval (%s)", first)
	prefix := "allowed by " + strings.Join(x.DecidedBy, ", ")
	if strings.HasPrefix(x.Summary, prefix) {
		x.Summary = prefix + note + x.Summary[len(prefix):]
	} else {
		x.Summary += note
	}
}
