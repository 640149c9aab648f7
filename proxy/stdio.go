package proxy

import (
	"context"
	"io"

	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
)

// ServeStdio serves one client on in/out as principal until ctx ends or in
// closes. Nothing but protocol is written to out.
func (s *Server) ServeStdio(ctx context.Context, subject authz.Subject, in io.Reader, out io.Writer) error {
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		return WithSubject(ctx, subject)
	})
	// The session registers with Listen's context: carry the subject there
	// too, so policy changes reach this client.
	return stdio.Listen(WithSubject(ctx, subject), in, out)
}
