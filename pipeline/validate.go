package pipeline

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/toolschema"
)

// ArgumentLimits cap a call's arguments before they are checked against the
// schema: MaxBytes their size as sent, MaxDepth how deep objects and arrays
// nest (the arguments object itself is level 1). Zero means no cap.
type ArgumentLimits struct {
	MaxBytes int64
	MaxDepth int
}

// Validate checks the exact argument bytes against the tool's compiled
// input schema, so the upstream only ever sees arguments it declared. A
// tool whose definition changed since it was pinned, or whose server is
// not connected, stops here too: nothing after this link could run it.
// Arguments over the limits are refused before the schema sees them. For a
// tool with an operator's override (upstreams/overrides), the hidden
// parameters get their fixed values first (a value the client sent for one
// is replaced: the operator's wins), and the result is checked against the
// upstream's schema with the narrowings, so that every link after this one
// sees the arguments the upstream will get.
func Validate(limits ArgumentLimits) Link {
	return Step("validate", func(ctx context.Context, x *Exchange) *envelope.Error { return validate(ctx, x, limits) })
}

func validate(_ context.Context, x *Exchange, limits ArgumentLimits) *envelope.Error {
	if x.Tool.Changed {
		return &envelope.Error{Code: envelope.ToolChanged, Message: x.Tool.ChangeReason}
	}
	if x.Tool.Unreachable {
		return envelope.Errorf(envelope.UpstreamUnavailable, "the server behind %q is not connected; try again later", x.Tool.Name)
	}
	if n := int64(len(x.Call.Args)); limits.MaxBytes > 0 && n > limits.MaxBytes {
		return envelope.Errorf(envelope.InvalidArguments, "arguments are %d bytes, over the %d byte limit", n, limits.MaxBytes)
	}
	if limits.MaxDepth > 0 && jsonscan.NestsDeeperThan(x.Call.Args, limits.MaxDepth) {
		return envelope.Errorf(envelope.InvalidArguments, "arguments nest deeper than %d levels", limits.MaxDepth)
	}
	if x.Tool.Override == nil {
		if err := x.Tool.Input.ValidateArguments(x.Call.Args); err != nil {
			return invalid(err)
		}
		return nil
	}
	args, err := x.Tool.Override.Check(x.Call.Args)
	if err != nil {
		return invalid(err)
	}
	// The one place a link replaces the call's arguments: from here on the
	// call is the one the upstream gets, so conditions, approvals, duplicate
	// suppression and the audit trail decide on what is sent.
	x.Call.Args = args
	return nil
}

func invalid(err error) *envelope.Error {
	var v *toolschema.Violation
	if errors.As(err, &v) {
		return envelope.Errorf(envelope.InvalidArguments, "%s", v.Message).WithDetail("schema path " + v.Path)
	}
	return envelope.Errorf(envelope.InvalidArguments, "arguments could not be checked against the tool's schema").WithDetail(err.Error())
}
