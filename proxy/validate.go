package proxy

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/toolschema"
)

// validate checks the exact argument bytes against the tool's compiled
// input schema, so the upstream only ever sees arguments it declared.
func (p *Pipeline) validate(_ context.Context, x *exchange) *envelope.Error {
	if x.tool.Changed {
		return &envelope.Error{Code: envelope.ToolChanged, Message: x.tool.ChangeReason}
	}
	if x.tool.Unreachable {
		return envelope.Errorf(envelope.UpstreamUnavailable, "the server behind %q is not connected; try again later", x.tool.Name)
	}
	err := x.tool.Input.ValidateArguments(x.call.Args)
	if err == nil {
		return nil
	}
	var v *toolschema.Violation
	if errors.As(err, &v) {
		return envelope.Errorf(envelope.InvalidArguments, "%s", v.Message).WithDetail("schema path " + v.Path)
	}
	return envelope.Errorf(envelope.InvalidArguments, "arguments could not be checked against the tool's schema").WithDetail(err.Error())
}
