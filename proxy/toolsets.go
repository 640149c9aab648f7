package proxy

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/toolsets"
)

// A request's toolset (package toolsets) is picked from who calls and
// what the client says of itself: the HTTP request's headers, which the
// transport keeps on the context, and the clientInfo name it gave at
// initialize (kept per session) or, for a 2026-07-28 request, in the
// request's own _meta. It is picked again for every request, so tools/list
// and tools/call of one client always agree.

type headerKey struct{}

// withHeader returns ctx carrying the HTTP request's headers, when a
// toolset rule may read them (a context value is an allocation per
// request, which the fast path counts).
func (s *Server) withHeader(ctx context.Context, h http.Header) context.Context {
	if s.opts.Toolsets.Empty() {
		return ctx
	}
	return context.WithValue(ctx, headerKey{}, h)
}

// headerFrom is the HTTP request's headers in ctx; nil over stdio.
func headerFrom(ctx context.Context) http.Header {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	return h
}

// toolsetOf is the toolset of the request in ctx, whose _meta is meta
// (nil: none, every tool the policy allows).
func (s *Server) toolsetOf(ctx context.Context, meta *mcp.Meta) *toolsets.Set {
	if s.opts.Toolsets.Empty() {
		return nil
	}
	subject := SubjectFrom(ctx)
	set, _ := s.opts.Toolsets.Select(toolsets.Request{
		Principal: subject.Principal,
		Roles:     func() []string { return s.opts.Policy().RolesOf(subject) },
		Client:    s.clientName(ctx, meta),
		Header:    headerFrom(ctx),
	})
	return set
}

// clientName is the clientInfo name of the request's client: a
// 2026-07-28 request's own, or what its session's client gave at
// initialize; "" when unknown.
func (s *Server) clientName(ctx context.Context, meta *mcp.Meta) string {
	if server.IsModernRequest(ctx) {
		if info := meta.ClientInfo(); info != nil {
			return info.Name
		}
		return ""
	}
	if e := s.session(sessionID(ctx)); e != nil {
		if name := e.client.Load(); name != nil {
			return *name
		}
	}
	return ""
}
