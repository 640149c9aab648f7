package proxy

import (
	"context"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
)

// authorize asks whether the subject may call the tool at all, on the
// canonical <server>/<tool> ID, never the client's string (keyMatch would
// let "orders/../x" through a wildcard). Lines with argument conditions
// are decided later, on the validated arguments (checkConditions), so that
// a caller who may not call the tool never learns its schema.
func (p *Pipeline) authorize(_ context.Context, x *exchange) *envelope.Error {
	if x.policy.Visible(x.call.Subject, x.tool.ID) {
		return nil
	}
	return notAllowed(x).WithDetail("no policy line lets " + x.call.Subject.Principal + " call " + x.tool.ID)
}

// checkConditions makes the full decision, argument conditions included,
// on the arguments validate accepted. An evaluation error denies; its text
// goes to the log only.
func (p *Pipeline) checkConditions(_ context.Context, x *exchange) *envelope.Error {
	d := x.policy.Decide(authz.Request{Subject: x.call.Subject, Object: x.tool.ID, Action: authz.ActCall, Args: x.call.Args})
	if d.Allowed {
		x.rule = d.Rule
		return nil
	}
	detail := "denied by policy"
	if d.Rule != "" {
		detail += " at " + d.Rule
	}
	if d.Internal != nil {
		detail += ": " + d.Internal.Error()
	}
	return notAllowed(x).WithDetail(detail)
}

func notAllowed(x *exchange) *envelope.Error {
	return envelope.Errorf(envelope.ToolNotAllowed, "you are not allowed to call %q", x.tool.Name)
}
