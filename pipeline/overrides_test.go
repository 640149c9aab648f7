package pipeline_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

// overridden is a catalog whose orders/search is renamed find_orders, with
// region hidden and fixed to "eu" and status narrowed to open or shipped.
func overridden(t *testing.T) *upstreams.Catalog {
	t.Helper()
	srv := upstreams.Server{Name: "orders", ToolPrefix: "orders__", Overrides: map[string]*overrides.Override{"search": {
		Name:   "find_orders",
		Hide:   map[string]json.RawMessage{"region": json.RawMessage(`"eu"`)},
		Narrow: map[string]json.RawMessage{"status": json.RawMessage(`{"enum":["open","shipped"]}`)},
	}}}
	cat, err := upstreams.Build([]upstreams.Server{srv}, map[string][]upstreams.Listed{"orders": {{Name: "search",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"region":{"enum":["eu","us"]},` +
			`"status":{"type":"string"}},"required":["q","region"]}`)}}}, nil)
	if err != nil || len(cat.Quarantined()) != 0 {
		t.Fatalf("catalog: %v %v", err, cat.Quarantined())
	}
	return cat
}

// The upstream gets its own tool name and the client's arguments with the
// fixed value, even when the client sends one of its own for it; a client
// cannot set a narrowed parameter outside its narrowing; the renamed tool answers only to its new name.
func TestOverrideInjectsFixedArguments(t *testing.T) {
	cases := []struct {
		name, tool, args, code, msg string
		sent                        string // what the upstream got; "" when nothing was sent
	}{
		{"fixed value added", "find_orders", `{"q":"late", "status":"open"}`, "", "", `{"q":"late", "status":"open","region":"eu"}`},
		{"no arguments but the required", "find_orders", `{"q":"x"}`, "", "", `{"q":"x","region":"eu"}`},
		{"hidden parameter sent", "find_orders", `{"q":"x","region":"us"}`, "", "", `{"q":"x","region":"eu"}`},
		{"hidden parameter sent escaped", "find_orders", `{"q":"x","\u0072egion":"us"}`, "", "", `{"q":"x","\u0072egion":"eu"}`},
		{"outside the narrowing", "find_orders", `{"q":"x","status":"cancelled"}`, "invalid_arguments", "", ""},
		{"old name", "orders__search", `{"q":"x"}`, "tool_not_found", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tool string
			up := &pipelinetest.Upstreams{Fn: func(_ context.Context, _, name string, _ json.RawMessage) (json.RawMessage, error) {
				tool = name
				return json.RawMessage(pipelinetest.OKText), nil
			}}
			chain := pipelinetest.New(t, pipelinetest.Parts{Upstreams: up, Catalog: overridden(t),
				Policy: pipelinetest.Policy{Allow: map[string]bool{"alice orders/search": true}}})
			env := pipelinetest.Envelope(t, chain.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: c.tool, Args: []byte(c.args)}))
			if got := pipelinetest.Code(env); got != c.code {
				t.Fatalf("code %q (%v), want %q", got, env.Message, c.code)
			}
			if env.Message != nil && !strings.Contains(*env.Message, c.msg) {
				t.Errorf("message %q, want %q", *env.Message, c.msg)
			}
			if c.sent == "" {
				if up.Calls() != 0 {
					t.Errorf("the upstream was called with %s", up.Got())
				}
				return
			}
			if string(up.Got()) != c.sent || tool != "search" {
				t.Errorf("upstream got %s %s, want search %s", tool, up.Got(), c.sent)
			}
		})
	}
}

// The policy's argument conditions decide on the final arguments: a
// condition on the hidden parameter sees the operator's value.
func TestOverrideConditionsSeeFixedArguments(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	chain := pipelinetest.New(t, pipelinetest.Parts{Upstreams: up, Catalog: overridden(t),
		Policy: pipelinetest.Policy{Allow: map[string]bool{"alice orders/search": true}, DenyArgs: `"region":"eu"`}})
	env := pipelinetest.Envelope(t, chain.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: "find_orders", Args: []byte(`{"q":"x"}`)}))
	if pipelinetest.Code(env) != "tool_not_allowed" || up.Calls() != 0 {
		t.Fatalf("code %q, %d calls: conditions did not see the fixed region", pipelinetest.Code(env), up.Calls())
	}
}
