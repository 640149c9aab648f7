package proxy

import "context"

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal. The
// transports set it before any MCP handling.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal in ctx, or "" (which every policy
// denies) when there is none.
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}
