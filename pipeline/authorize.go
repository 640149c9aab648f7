package pipeline

import (
	"context"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
)

// Authorize asks whether the subject may call the tool at all, on the
// canonical <server>/<tool> ID, never the client's string (keyMatch would
// let "orders/../x" through a wildcard). Lines with argument conditions
// are decided later, on the validated arguments (Conditions), so that a
// caller who may not call the tool never learns its schema.
func Authorize() Link { return Step("authorize", authorize) }

func authorize(_ context.Context, x *Exchange) *envelope.Error {
	if x.Policy.Visible(x.Call.Subject, x.Tool.ID) {
		return nil
	}
	return notAllowed(x).WithDetail("no policy line lets " + x.Call.Subject.Principal + " call " + x.Tool.ID)
}

// Conditions makes the full decision, argument conditions included, on
// the arguments validate accepted. An evaluation error denies; its text
// goes to the log only.
func Conditions() Link { return Step("conditions", conditions) }

func conditions(_ context.Context, x *Exchange) *envelope.Error {
	d := x.Policy.Decide(authz.Request{Subject: x.Call.Subject, Object: x.Tool.ID, Action: authz.ActCall, Args: x.Call.Args})
	if d.Allowed {
		x.Rule = d.Rule
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

func notAllowed(x *Exchange) *envelope.Error {
	return envelope.Errorf(envelope.ToolNotAllowed, "you are not allowed to call %q", x.Tool.Name)
}
