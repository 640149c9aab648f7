package pipeline_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// TestScopesLink: a token lacking a scope the tool needs is answered insufficient_scope, naming
// the scope, without reaching the upstream, and the request's ScopeChallenge gets the token's scopes
// with the missing one; with the scope, or with a credential that has no scopes (an API key), the
// call runs; a call the policy denies is denied first, never told to step up.
func TestScopesLink(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	p := pipelinetest.NewBuilder(t, up)
	policy := pipelinetest.AliceMayCall()
	policy.Scopes = map[string][]string{"orders/get": {"orders:read"}}
	p.Policy = policy
	call := func(sub authz.Subject) (string, string, []string, bool) {
		ctx, challenge := pipeline.WithScopeChallenge(context.Background())
		env := pipelinetest.Envelope(t, p.Handle(ctx, pipeline.Call{Subject: sub, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
		scopes, noted := challenge.Scopes()
		msg := ""
		if env.Message != nil {
			msg = *env.Message
		}
		return pipelinetest.Code(env), msg, scopes, noted
	}

	code, msg, scopes, noted := call(authz.Subject{Principal: "alice", Scoped: true, Scopes: []string{"profile"}})
	if code != "insufficient_scope" || !strings.Contains(msg, "needs the OAuth scope orders:read") || strings.Contains(msg, "test:2") {
		t.Fatalf("lacking the scope: %s %q", code, msg)
	}
	if !noted || !slices.Equal(scopes, []string{"orders:read", "profile"}) || up.Calls() != 0 {
		t.Fatalf("challenge %v (noted %v), upstream calls %d", scopes, noted, up.Calls())
	}
	if code, _, _, noted := call(authz.Subject{Principal: "alice", Scoped: true, Scopes: []string{"orders:read"}}); code != "" || noted || up.Calls() != 1 {
		t.Fatalf("with the scope: %q, noted %v, upstream calls %d", code, noted, up.Calls())
	}
	if code, _, _, noted := call(authz.Subject{Principal: "alice"}); code != "" || noted || up.Calls() != 2 {
		t.Fatalf("an API key: %q, noted %v, upstream calls %d", code, noted, up.Calls())
	}
	if code, _, _, noted := call(authz.Subject{Principal: "bob", Scoped: true}); code != "tool_not_allowed" || noted {
		t.Fatalf("a denied caller: %q, noted %v", code, noted)
	}
	// Without a ScopeChallenge on the context (stdio), the envelope is the whole answer.
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Subject: authz.Subject{Principal: "alice", Scoped: true}, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "insufficient_scope" || env.Retryable {
		t.Fatalf("without a challenge: %+v", env)
	}
}

func TestChallengeScopes(t *testing.T) {
	if got := pipeline.ChallengeScopes([]string{"b", "a"}, []string{"c", "a"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v", got)
	}
	pipeline.NoteScopeChallenge(context.Background(), []string{"x"}) // no challenge on the context: nothing happens
}
