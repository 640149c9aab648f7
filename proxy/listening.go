package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/listenstream"
	"github.com/toolgate/toolgate/upstreams"
)

// A 2025-era Streamable HTTP client gets sampling and roots only on its
// GET listening stream, and mcp-go loses a request sent while no GET is
// attached (see internal/listenstream): the relay waits for the client's
// GET, and answers the upstream with an error if none opens in time.

// viaHTTPKey marks the context of a request that came over Streamable
// HTTP (mcp-go's own marker is unexported).
type viaHTTPKey struct{}

func withHTTP(ctx context.Context) context.Context { return context.WithValue(ctx, viaHTTPKey{}, true) }

func viaHTTP(ctx context.Context) bool { v, _ := ctx.Value(viaHTTPKey{}).(bool); return v }

// awaitListener is nil when method may be sent to the client of the
// relay now, or the error for the upstream when its listening stream did
// not open in time. Only a 2025-era HTTP session needs one, and only for
// sampling and roots.
func (r *clientRelay) awaitListener(method string) *upstreams.RelayError {
	if r.listening == nil || (method != string(mcp.MethodSamplingCreateMessage) && method != string(mcp.MethodListRoots)) {
		return nil
	}
	if r.listening.Await(r.ctx, r.session, listenstream.Grace) {
		return nil
	}
	return &upstreams.RelayError{Code: mcp.INTERNAL_ERROR,
		Message: "the client has no listening stream (HTTP GET) open to receive " + method}
}
