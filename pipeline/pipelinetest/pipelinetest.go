// Package pipelinetest builds chains for the tests of the pipeline and of
// the guards: a small catalog, a policy and an upstream that tests
// control, and the core links in the gateway's order around the guards a
// test puts in. The gateway's own order is in gateway/chain.go; its tests
// check that this package keeps to it.
package pipelinetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

var (
	Alice = authz.Subject{Principal: "alice"}
	Bob   = authz.Subject{Principal: "bob"}
)

const (
	// InputSchema is orders/get's: one required integer order_id.
	InputSchema = `{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`
	// OutputSchema is orders/typed's.
	OutputSchema = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`
	// OKText is a plain successful result.
	OKText = `{"content":[{"type":"text","text":"{\"found\":true}"}]}`
)

// Policy allows exactly the listed "principal object" pairs. DenyArgs
// denies a call whose arguments contain it (a stand-in for a condition);
// Err makes every decision fail; Approve demands an approval for the
// objects listed, by the rule given.
type Policy struct {
	Allow    map[string]bool
	DenyArgs string
	Err      error
	Roles    map[string][]string // principal -> roles
	Approve  map[string]string   // object -> the rule that demands approval
	Scopes   map[string][]string // object -> the OAuth scopes a call needs (s lines)
	Ver      string
}

var _ pipeline.Policy = Policy{}

func (f Policy) Visible(s authz.Subject, obj string) bool { return f.Allow[s.Principal+" "+obj] }

func (f Policy) Decide(req authz.Request) authz.Decision {
	if f.Err != nil {
		return authz.Decision{Internal: f.Err}
	}
	if f.DenyArgs != "" && strings.Contains(string(req.Args), f.DenyArgs) {
		return authz.Decision{Rule: "policy.csv:9"}
	}
	return authz.Decision{Allowed: req.Action == authz.ActCall && f.Allow[req.Subject.Principal+" "+req.Object], Rule: "policy.csv:1"}
}

func (f Policy) RolesOf(s authz.Subject) []string { return f.Roles[s.Principal] }

func (f Policy) ApprovalRule(req authz.Request) (string, bool) {
	rule, ok := f.Approve[req.Object]
	return rule, ok
}

// ApprovalDigest is the rule itself: each rule of the fake is its own version.
func (f Policy) ApprovalDigest(rule string) string { return rule }

func (f Policy) Version() string { return f.Ver }

// CheckScopes is what authz.Policy.CheckScopes answers for s lines that
// name f.Scopes[object] ("test:2" each).
func (f Policy) CheckScopes(req authz.Request) authz.ScopeCheck {
	check := authz.ScopeCheck{Needed: f.Scopes[req.Object]}
	if !req.Subject.Scoped {
		return check
	}
	for _, s := range check.Needed {
		if !slices.Contains(req.Subject.Scopes, s) {
			check.Missing = append(check.Missing, s)
			check.Rules = []string{"test:2"}
		}
	}
	return check
}

// AliceMayCall is the default policy: alice may call every tool of the
// test catalog, bob none.
func AliceMayCall() Policy {
	return Policy{Allow: map[string]bool{
		"alice orders/get": true, "alice orders/typed": true, "alice orders/small": true, "alice down/anything": true,
	}}
}

// Upstreams answers every call with Fn and counts the calls.
type Upstreams struct {
	Fn func(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error)

	mu    sync.Mutex
	calls int
	got   []byte
}

func (f *Upstreams) CallToolProgress(ctx context.Context, server, tool string, args json.RawMessage, _ func(upstreams.Progress)) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls++
	f.got = append([]byte(nil), args...)
	f.mu.Unlock()
	return f.Fn(ctx, server, tool, args)
}

// Calls is the number of calls made so far.
func (f *Upstreams) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Got are the argument bytes of the last call.
func (f *Upstreams) Got() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got
}

// Answer is an upstream that answers raw.
func Answer(raw string) func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(raw), nil
	}
}

// FailWith is an upstream that fails with err.
func FailWith(err error) func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) { return nil, err }
}

// Catalog has server "orders" (tools get, typed, small) and server "down"
// (not connected).
func Catalog(t testing.TB) *upstreams.Catalog {
	t.Helper()
	// As gateway.UpstreamServers makes them from a config with these two
	// servers, "small" capped at 2048 bytes (ServerNames order, config's
	// defaults).
	servers := []upstreams.Server{
		{Name: "down", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "down__",
			InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
			MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan},
		{Name: "orders", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "orders__",
			InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
			MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan,
			Tools: map[string]upstreams.ToolLimits{"small": {Timeout: config.DefaultCallTimeout, MaxResultBytes: 2048}}},
	}
	listed := map[string][]upstreams.Listed{"orders": {
		{Name: "get", InputSchema: json.RawMessage(InputSchema)},
		{Name: "typed", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(OutputSchema)},
		{Name: "small", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}}
	cat, err := upstreams.Build(servers, listed, map[string]string{"down": "exited"})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Parts are what a test chain is built of; every field may be left zero.
type Parts struct {
	Upstreams pipeline.Upstreams // default: one that answers OKText
	Policy    pipeline.Policy    // default: AliceMayCall
	// PolicySource, when set, is read for each call instead of Policy.
	PolicySource func() pipeline.Policy
	Catalog      *upstreams.Catalog  // default: Catalog
	Resilience   pipeline.Resilience // default: one attempt, no breaker
	RetrySafe    func(*upstreams.Tool) bool
	Recorder     *pipeline.Recorder // default: records nothing
	// Shadow runs between resolve and authorize, as the gateway's shadow
	// link (authz/shadow) does; default: none.
	Shadow *pipeline.Link
	// Guards run between conditions and execute, in the order given, as
	// the gateway's guards do.
	Guards []pipeline.Link
	// Arguments caps the arguments in validate; default: the config's
	// defaults (limits.max_argument_bytes, limits.max_argument_depth).
	Arguments pipeline.ArgumentLimits
	Metrics   *metrics.Metrics
	Tracing   *tracing.Tracing
	Now       func() time.Time
	Redact    *redact.Redactor // execute's and normalize's; default: none
}

// New builds a chain of the parts in the gateway's order.
func New(t testing.TB, p Parts) *pipeline.Chain {
	t.Helper()
	if p.Upstreams == nil {
		p.Upstreams = &Upstreams{Fn: Answer(OKText)}
	}
	if p.Policy == nil {
		p.Policy = AliceMayCall()
	}
	if p.Catalog == nil {
		p.Catalog = Catalog(t)
	}
	if p.Recorder == nil {
		p.Recorder = &pipeline.Recorder{}
	}
	if p.Arguments == (pipeline.ArgumentLimits{}) {
		p.Arguments = pipeline.ArgumentLimits{MaxBytes: config.DefaultMaxArgumentBytes, MaxDepth: config.DefaultMaxArgumentDepth}
	}
	cat, policy := p.Catalog, p.PolicySource
	if policy == nil {
		fixed := p.Policy
		policy = func() pipeline.Policy { return fixed }
	}
	links := []pipeline.Link{
		p.Recorder.Link(),
		pipeline.Authenticate(),
		pipeline.Resolve(func() *upstreams.Catalog { return cat }, p.RetrySafe),
	}
	if p.Shadow != nil {
		links = append(links, *p.Shadow)
	}
	links = append(links,
		pipeline.Authorize(),
		pipeline.Validate(p.Arguments),
		pipeline.Conditions(),
		pipeline.Scopes(),
	)
	links = append(links, p.Guards...)
	exec := &pipeline.Executor{Upstreams: p.Upstreams, Resilience: p.Resilience, Metrics: p.Metrics, Tracing: p.Tracing, Now: p.Now, Redact: p.Redact}
	links = append(links, exec.Link(), pipeline.Normalize(p.Redact))
	return pipeline.New(pipeline.Options{Policy: policy,
		Metrics: p.Metrics, Tracing: p.Tracing, Now: p.Now}, links...)
}

// Envelope decodes the structured answer, failing the test when it is not
// an envelope or contradicts isError.
func Envelope(t testing.TB, res *mcp.CallToolResult) envelope.Envelope {
	t.Helper()
	var env envelope.Envelope
	raw, err := json.Marshal(res.StructuredContent) // an envelope.Encoded, or a json.RawMessage from elsewhere
	if err != nil {
		t.Fatalf("structuredContent does not encode: %v", err)
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("structuredContent is not an envelope: %v", err)
	}
	if env.OK == res.IsError {
		t.Fatalf("ok=%v but isError=%v", env.OK, res.IsError)
	}
	return env
}

// Code is the envelope's error code, or "".
func Code(env envelope.Envelope) string {
	if env.ErrorCode == nil {
		return ""
	}
	return string(*env.ErrorCode)
}

// Builder is a test chain whose parts a test may change between calls:
// each Handle builds the chain anew from Parts. Guards, breakers and
// budgets are objects, so what they remember carries over.
type Builder struct {
	Parts
	t testing.TB
}

// NewBuilder is a Builder with the test catalog and up as the upstream.
func NewBuilder(t testing.TB, up pipeline.Upstreams) *Builder {
	return &Builder{Parts: Parts{Upstreams: up, Catalog: Catalog(t)}, t: t}
}

// Handle runs one call through a chain of the current parts.
func (b *Builder) Handle(ctx context.Context, call pipeline.Call) *mcp.CallToolResult {
	return New(b.t, b.Parts).Handle(ctx, call)
}

// Chain is a chain of the current parts.
func (b *Builder) Chain() *pipeline.Chain { return New(b.t, b.Parts) }

// CatalogNow is the builder's catalog.
func (b *Builder) CatalogNow() *upstreams.Catalog { return b.Catalog }

// Counting is an upstream that answers or fails by attempt number (from 1).
type Counting struct {
	Calls atomic.Int32
	Fn    func(ctx context.Context, n int32) (json.RawMessage, error)
}

func (c *Counting) CallToolProgress(ctx context.Context, _, _ string, _ json.RawMessage, _ func(upstreams.Progress)) (json.RawMessage, error) {
	return c.Fn(ctx, c.Calls.Add(1))
}

var (
	// Broken is a call whose connection broke after it was sent: the
	// outcome is unknown.
	Broken = &upstreams.CallError{Where: upstreams.Sent, Err: errors.New("connection reset")}
	// NotSent is a call that never left: nothing ran.
	NotSent = &upstreams.CallError{Where: upstreams.NotSent, Err: upstreams.ErrNotConnected}
	// GetOrder is alice's call of orders/get that the test catalog and
	// AliceMayCall allow.
	GetOrder = pipeline.Call{Subject: Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
)

// Resilient is a builder with breakers, retries and a budget on "orders";
// safe says whether its tools are retry-safe. Build it inside a synctest
// bubble: the breaker and the budget read the clock.
func Resilient(t testing.TB, up pipeline.Upstreams, safe bool) *Builder {
	p := NewBuilder(t, up)
	p.RetrySafe = func(*upstreams.Tool) bool { return safe }
	p.Resilience = pipeline.Resilience{
		Breakers: breaker.NewSet(map[string]breaker.Settings{"orders": {Failures: 5, OpenFor: 30 * time.Second}}, nil),
		Budgets:  map[string]*breaker.Budget{"orders": breaker.NewBudget(0.2, 10, time.Now)},
		Retry:    map[string]breaker.RetrySettings{"orders": {MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}},
		Rand:     func() float64 { return 1 },
	}
	return p
}
