package proxy

import (
	"context"

	"github.com/toolgate/toolgate/envelope"
)

// actCall is the Casbin action of a tools/call.
const actCall = "call"

// authorize asks the policy about the canonical <server>/<tool> ID, never the
// client's string (keyMatch would let "orders/../x" through a wildcard). An
// enforce error denies; its text goes to the log only.
func (p *Pipeline) authorize(_ context.Context, x *exchange) *envelope.Error {
	allowed, internal := p.Policy.Decide(x.call.Principal, x.tool.ID, actCall)
	if allowed {
		return nil
	}
	e := envelope.Errorf(envelope.ToolNotAllowed, "you are not allowed to call %q", x.tool.Name)
	if internal != nil {
		return e.WithDetail("policy error: " + internal.Error())
	}
	return e.WithDetail("denied by policy for " + x.tool.ID)
}
