package pipeline

import (
	"context"
	"sync/atomic"
)

// A call during which the upstream asked the caller's client something
// (sampling, elicitation, roots) is not a pure function of its arguments:
// its answer depends on what that client said, so it belongs to that caller
// alone and is never shared with another request (duplicate suppression
// neither replays it nor hands it to a joined call). The relay that carries
// the question notes it on the call's context; guards read it.

type interactionKey struct{}

// WithInteraction returns ctx able to note an interaction (see
// NoteInteraction). The transport calls it once per client call, before it
// binds the relay to ctx.
func WithInteraction(ctx context.Context) context.Context {
	return context.WithValue(ctx, interactionKey{}, new(atomic.Bool))
}

// NoteInteraction records that the upstream asked the client of ctx's call
// something, whatever the client answered. Without WithInteraction it does
// nothing.
func NoteInteraction(ctx context.Context) {
	if b, ok := ctx.Value(interactionKey{}).(*atomic.Bool); ok {
		b.Store(true)
	}
}

// Interacted reports whether NoteInteraction was called for ctx's call.
func Interacted(ctx context.Context) bool {
	b, ok := ctx.Value(interactionKey{}).(*atomic.Bool)
	return ok && b.Load()
}
