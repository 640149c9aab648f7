package proxy

import (
	"context"
	"io"

	"github.com/mark3labs/mcp-go/server"
)

// ServeStdio serves one client on in/out as principal until ctx ends or in
// closes. Nothing but protocol is written to out.
func (s *Server) ServeStdio(ctx context.Context, principal string, in io.Reader, out io.Writer) error {
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		return WithPrincipal(ctx, principal)
	})
	return stdio.Listen(ctx, in, out)
}
