package proxy

import (
	"context"

	"github.com/toolgate/toolgate/authz"
)

type subjectKey struct{}

// WithSubject returns ctx carrying the authenticated subject. The
// transports set it before any MCP handling.
func WithSubject(ctx context.Context, s authz.Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject in ctx, or the zero Subject (which every
// policy denies) when there is none.
func SubjectFrom(ctx context.Context) authz.Subject {
	s, _ := ctx.Value(subjectKey{}).(authz.Subject)
	return s
}
