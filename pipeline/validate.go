package pipeline

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/toolschema"
)

// Validate checks the exact argument bytes against the tool's compiled
// input schema, so the upstream only ever sees arguments it declared. A
// tool whose definition changed since it was pinned, or whose server is
// not connected, stops here too: nothing after this link could run it.
func Validate() Link { return Step("validate", validate) }

func validate(_ context.Context, x *Exchange) *envelope.Error {
	if x.Tool.Changed {
		return &envelope.Error{Code: envelope.ToolChanged, Message: x.Tool.ChangeReason}
	}
	if x.Tool.Unreachable {
		return envelope.Errorf(envelope.UpstreamUnavailable, "the server behind %q is not connected; try again later", x.Tool.Name)
	}
	err := x.Tool.Input.ValidateArguments(x.Call.Args)
	if err == nil {
		return nil
	}
	var v *toolschema.Violation
	if errors.As(err, &v) {
		return envelope.Errorf(envelope.InvalidArguments, "%s", v.Message).WithDetail("schema path " + v.Path)
	}
	return envelope.Errorf(envelope.InvalidArguments, "arguments could not be checked against the tool's schema").WithDetail(err.Error())
}
