package pipeline

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
)

// Scopes stops a call whose OAuth access token lacks a scope the
// policy's scope lines require for the tool (docs/policy.md, "Scopes"):
// insufficient_scope. It runs after conditions, so it only ever stops a
// call the policy otherwise allows: a client told to step up gets a call
// that then runs, never a denial it could not have scoped its way out of.
// Callers whose credential carries no scopes (API keys, stdio) are not
// limited by scope lines.
//
// Over Streamable HTTP the answer should be HTTP 403 with a
// WWW-Authenticate challenge rather than an envelope in a 200: the link
// notes the scopes to ask for on the request's ScopeChallenge (when the
// transport put one on the context), and the transport answers 403 when
// its response has not started. The envelope is what every other
// transport, and a response already streaming, gets.
func Scopes() Link { return Step("scopes", checkScopes) }

func checkScopes(ctx context.Context, x *Exchange) *envelope.Error {
	check := x.Policy.CheckScopes(authz.Request{Subject: x.Call.Subject, Object: x.Tool.ID, Action: authz.ActCall})
	if len(check.Missing) == 0 {
		return nil
	}
	NoteScopeChallenge(ctx, ChallengeScopes(x.Call.Subject.Scopes, check.Missing))
	return envelope.Errorf(envelope.InsufficientScope, "calling %q needs the OAuth scope %s, which the access token lacks; authorize again asking for it, then repeat the call",
		x.Tool.Name, strings.Join(check.Missing, " ")).WithDetail("scope lines " + strings.Join(check.Rules, ", "))
}

// ChallengeScopes are the scopes an insufficient_scope challenge names:
// those the token has and those the request lacks, sorted. The MCP
// authorization specification ("Scope Challenge Handling") recommends
// naming both, because a client replaces the scopes it asks for with
// the challenge's (the official TypeScript SDK does): naming only the
// missing ones would cost the token what it already had, and the next
// call of another tool would need another step-up.
func ChallengeScopes(have, missing []string) []string {
	out := make([]string, 0, len(have)+len(missing))
	out = append(append(out, have...), missing...)
	slices.Sort(out)
	return slices.Compact(out)
}

// ScopeChallenge is where a request's links note that its token lacks
// scopes, for the transport to answer HTTP 403 with a challenge instead
// of the JSON-RPC answer. A transport that can answer so puts one on the
// request's context (WithScopeChallenge); it is safe for concurrent use.
type ScopeChallenge struct {
	mu     sync.Mutex
	scopes []string
	noted  bool
}

type scopeChallengeKey struct{}

// WithScopeChallenge is ctx carrying a fresh ScopeChallenge, which the
// caller reads once the request is answered.
func WithScopeChallenge(ctx context.Context) (context.Context, *ScopeChallenge) {
	c := &ScopeChallenge{}
	return context.WithValue(ctx, scopeChallengeKey{}, c), c
}

// NoteScopeChallenge records on ctx's ScopeChallenge, if it has one,
// that the request needs scopes (the whole scope parameter of the
// challenge: see ChallengeScopes). A later note replaces an earlier one.
func NoteScopeChallenge(ctx context.Context, scopes []string) {
	c, _ := ctx.Value(scopeChallengeKey{}).(*ScopeChallenge)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.scopes, c.noted = slices.Clone(scopes), true
	c.mu.Unlock()
}

// Scopes are the scopes noted, and whether any request noted them.
func (c *ScopeChallenge) Scopes() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.scopes), c.noted
}
