package pipeline

import (
	"context"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// Authenticate is the chain's first check: the transport authenticated
// the caller before any MCP handling (an HTTP request without a valid
// credential is answered 401 and never becomes a call; a stdio client is
// auth.stdio_principal). A call that reaches the chain without a principal
// is a bug in a transport, and is refused rather than decided as nobody.
func Authenticate() Link {
	return Step("authenticate", func(_ context.Context, x *Exchange) *envelope.Error {
		if x.Call.Subject.Principal == "" {
			return envelope.Errorf(envelope.InternalError, "the gateway failed while handling this call").
				WithDetail("the call reached the pipeline without an authenticated principal")
		}
		return nil
	})
}

// Resolve maps the client-facing name to its catalog entry, in the
// catalog's current snapshot. retrySafe says whether a tool may be
// repeated after an unknown outcome (nil: never); a tool whose server is
// not connected never is.
func Resolve(catalog func() *upstreams.Catalog, retrySafe func(*upstreams.Tool) bool) Link {
	return Step("resolve", func(_ context.Context, x *Exchange) *envelope.Error {
		tool, ok := catalog().Resolve(x.Call.Name)
		if !ok {
			return envelope.Errorf(envelope.ToolNotFound, "no tool named %q; call tools/list for the tools you may use", sanitize.Clip(x.Call.Name, 80))
		}
		x.Tool = tool
		x.RetrySafe = retrySafe != nil && !tool.Unreachable && retrySafe(tool)
		return nil
	})
}
