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

// notFound is the answer for a name the caller has no tool by.
func notFound(name string) *envelope.Error {
	return envelope.Errorf(envelope.ToolNotFound, "no tool named %q; call tools/list for the tools you may use", sanitize.Clip(name, 80))
}

// Resolve maps the client-facing name to its catalog entry, in the
// catalog's current snapshot, among the tools of the call's toolset. retrySafe says whether a tool may be
// repeated after an unknown outcome (nil: never); a tool whose server is
// not connected never is.
func Resolve(catalog func() *upstreams.Catalog, retrySafe func(*upstreams.Tool) bool) Link {
	return Step("resolve", func(_ context.Context, x *Exchange) *envelope.Error {
		if x.Call.Refused != nil {
			return x.Call.Refused
		}
		tool, ok := catalog().Resolve(x.Call.Name)
		if !ok {
			return notFound(x.Call.Name)
		}
		if !x.Call.Toolset.Has(tool.ID) {
			// The same answer as for a name that does not exist: the client
			// was never shown the tool, so it cannot be the tool it meant.
			return notFound(x.Call.Name).WithDetail("tool " + tool.ID + " is outside toolset " + x.Call.Toolset.Label())
		}
		x.Tool = tool
		x.RetrySafe = retrySafe != nil && !tool.Unreachable && retrySafe(tool)
		return nil
	})
}
