package upstreams

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func template(t *testing.T, raw string) mcp.ResourceTemplate {
	t.Helper()
	var tmpl mcp.ResourceTemplate
	if err := json.Unmarshal([]byte(`{"name":"t","uriTemplate":"`+raw+`"}`), &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func featureConfig(prefixA string) []Server {
	return []Server{{Name: "a", ToolPrefix: prefixA}, {Name: "b", ToolPrefix: "b__"}}
}

func TestBuildFeaturesNamesAndOwners(t *testing.T) {
	f := buildFeatures(featureConfig("A_"), map[string]*ServerFeatures{
		"a": {HasResources: true,
			Resources: []mcp.Resource{{URI: "file:///x", Name: "x\x1b[31m"}},
			Templates: []mcp.ResourceTemplate{template(t, "docs://{id}")},
			Prompts:   []mcp.Prompt{{Name: "greet", Description: "hi\u202e"}}},
		"b": {HasResources: true,
			Resources: []mcp.Resource{{URI: "file:///x", Name: "same uri"}, {URI: "file:///y", Name: "y"}},
			Prompts:   []mcp.Prompt{{Name: "greet"}}},
	})
	r, ok := f.Resource("file:///x")
	if !ok || r.Server != "a" || r.ID != "a/file:///x" || r.Resource.Name != "A_x" {
		t.Errorf("file:///x: %+v", r)
	}
	if w := f.Warnings(); len(w) != 1 || !strings.Contains(w[0], `resource "file:///x" of server b`) {
		t.Errorf("want one warning, for b's file:///x (prompts A_greet and b__greet differ): %v", w)
	}
	if p, ok := f.Prompt("A_greet"); !ok || p.Upstream != "greet" || p.ID != "a/greet" || p.Prompt.Description != "hi" {
		t.Errorf("A_greet: %+v", p)
	}
	if _, ok := f.Prompt("b__greet"); !ok {
		t.Error("b__greet missing")
	}
	for uri, want := range map[string]string{"file:///y": "b", "docs://42": "a"} {
		if got, ok := f.Owner(uri); !ok || got != want {
			t.Errorf("Owner(%s) = %q %v, want %s", uri, got, ok, want)
		}
	}
	if _, ok := f.Owner("unknown://z"); ok {
		t.Error("an unlisted URI has an owner although two servers offer resources")
	}
	if srv, ok := f.TemplateOwner("docs://{id}"); !ok || srv != "a" {
		t.Errorf("TemplateOwner = %q %v", srv, ok)
	}
}

func TestBuildFeaturesCollisions(t *testing.T) {
	cfg := []Server{{Name: "a"}, {Name: "b"}}
	f := buildFeatures(cfg, map[string]*ServerFeatures{
		"a": {Resources: []mcp.Resource{{URI: "u://1"}}, Prompts: []mcp.Prompt{{Name: "p"}}},
		"b": {Resources: []mcp.Resource{{URI: "u://1"}}, Prompts: []mcp.Prompt{{Name: "p"}}, HasResources: true},
	})
	if r, _ := f.Resource("u://1"); r.Server != "a" {
		t.Errorf("u://1 belongs to %s, want the first server a", r.Server)
	}
	if p, _ := f.Prompt("p"); p.Server != "a" {
		t.Errorf("p belongs to %s", p.Server)
	}
	if w := strings.Join(f.Warnings(), "\n"); !strings.Contains(w, `resource "u://1" of server b is hidden`) || !strings.Contains(w, `prompt "p" of server b is hidden`) {
		t.Errorf("warnings: %s", w)
	}
	if srv, ok := f.Owner("u://other"); !ok || srv != "b" {
		t.Errorf("unlisted URI with one resource server: %q %v, want b", srv, ok)
	}
}

type fakeRelay struct{ session string }

func (r fakeRelay) Session() string { return r.session }
func (r fakeRelay) Request(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"from":"` + r.session + `","method":"` + method + `"}`), nil
}
func (r fakeRelay) Log(json.RawMessage) {}

func TestRelaySetSole(t *testing.T) {
	var s relaySet
	if s.sole() != nil {
		t.Fatal("empty set has a relay")
	}
	s.add("1", fakeRelay{"x"})
	s.add("2", fakeRelay{"x"})
	if r := s.sole(); r == nil || r.Session() != "x" {
		t.Fatalf("one session's requests: %v", r)
	}
	s.add("3", fakeRelay{"y"})
	if r := s.sole(); r != nil {
		t.Fatalf("two sessions in flight, yet relayed to %s", r.Session())
	}
	s.remove("3")
	if r := s.sole(); r == nil {
		t.Fatal("back to one session, no relay")
	}
}

func TestInputRequiredRoundTrip(t *testing.T) {
	raw := json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"st-1"}`)
	need, ok := needsInput(raw)
	if !ok || need.RequestState != "st-1" || len(need.InputRequests) != 1 {
		t.Fatalf("needsInput: %+v %v", need, ok)
	}
	if _, ok := needsInput(json.RawMessage(`{"content":[]}`)); ok {
		t.Error("an ordinary result needs input")
	}
	c := &Conn{}
	ctx := WithRelay(context.Background(), fakeRelay{"s"})
	answers, err := c.fulfil(ctx, need.InputRequests)
	if err != nil || !strings.Contains(string(answers["q"]), `"method":"elicitation/create"`) {
		t.Fatalf("fulfil: %s %v", answers["q"], err)
	}
	if _, err := c.fulfil(ctx, map[string]json.RawMessage{"x": json.RawMessage(`{"method":"tools/call"}`)}); err == nil {
		t.Error("an input request the gateway does not relay was fulfilled")
	}
	params, err := withInput(map[string]any{"name": "t", "arguments": json.RawMessage(`{"n":9007199254740993}`)}, answers, need.RequestState)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(params)
	for _, want := range []string{`"requestState":"st-1"`, `"inputResponses":{"q":`, `9007199254740993`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("retry params %s lack %s", b, want)
		}
	}
}

// Building a catalog never writes into the listing it reads (earlier
// catalogs share it), and two fresh identical listings with templates are
// the same (or every relist would rebuild the catalog).
func TestFeaturesListingUntouchedAndComparable(t *testing.T) {
	listing := func() *ServerFeatures {
		return &ServerFeatures{HasResources: true,
			Templates: []mcp.ResourceTemplate{template(t, "docs://{id}")},
			Prompts:   []mcp.Prompt{{Name: "p", Arguments: []mcp.PromptArgument{{Name: "a", Description: "x\x1b[2J"}}}}}
	}
	l := listing()
	buildFeatures(featureConfig("A_"), map[string]*ServerFeatures{"a": l})
	if got := l.Prompts[0].Arguments[0].Description; got != "x\x1b[2J" {
		t.Errorf("the listing was rewritten: %q", got)
	}
	if !sameFeatures(listing(), listing()) {
		t.Error("two identical listings with a template compare different")
	}
	other := listing()
	other.Prompts[0].Name = "q"
	if sameFeatures(listing(), other) {
		t.Error("different listings compare the same")
	}
}

// A request from the upstream that nothing ties to a client request goes
// only to the one request in flight: two calls of one session are not
// interchangeable (the answer is part of one call's outcome, and on the
// fast path the question travels on that call's own response), so with two
// in flight it is refused, as with two sessions.
func TestRelaySetOnly(t *testing.T) {
	var s relaySet
	if s.only() != nil {
		t.Fatal("empty set has a relay")
	}
	s.add("1", fakeRelay{"x"})
	if r := s.only(); r == nil || r.Session() != "x" {
		t.Fatalf("one request in flight: %v", r)
	}
	s.add("2", fakeRelay{"x"})
	if r := s.only(); r != nil {
		t.Fatalf("two calls of one session in flight, yet relayed to one of them (%s)", r.Session())
	}
	s.remove("1")
	if r := s.only(); r == nil {
		t.Fatal("back to one request, no relay")
	}
}
