package upstreams

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

func searchTool() Listed {
	return Listed{Name: "search", Description: "Searches orders.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"shop":{"type":"string"}},"required":["q","shop"]}`),
		Annotations: json.RawMessage(`{"destructiveHint":true}`)}
}

// An override renames the tool (the old name no longer resolves), replaces
// what clients see, and keeps the canonical ID on the upstream's name.
func TestCatalogAppliesOverrides(t *testing.T) {
	yes, no, title := true, false, "Find orders"
	srv := &Server{Name: "orders", ToolPrefix: "orders__", Overrides: map[string]*overrides.Override{"search": {
		Name: "find_orders", Title: &title, DescriptionAppend: "EU shop only.", ReadOnlyHint: &yes, DestructiveHint: &no,
		Hide: map[string]json.RawMessage{"shop": json.RawMessage(`"eu"`)},
	}}}
	cat, err := Build(servers(srv), map[string][]Listed{"orders": {searchTool(), orderTool()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := cat.Quarantined(); len(q) != 0 {
		t.Fatalf("quarantined %v", q)
	}
	if _, ok := cat.Resolve("orders__search"); ok {
		t.Error("the renamed tool still resolves by its old name")
	}
	tool, ok := cat.Resolve("find_orders")
	if !ok || tool.ID != "orders/search" || tool.Upstream != "search" || tool.Override == nil {
		t.Fatalf("Resolve(find_orders) = %+v, %v", tool, ok)
	}
	if tool.Title != title || tool.Description != "Searches orders.\n\nEU shop only." || !*tool.Annotations.ReadOnlyHint || *tool.Annotations.DestructiveHint {
		t.Errorf("presentation: %q %q %+v", tool.Title, tool.Description, tool.Annotations)
	}
	if s := string(tool.InputSchema); strings.Contains(s, "shop") {
		t.Errorf("client-facing schema shows the hidden parameter: %s", s)
	}
	if err := tool.Input.ValidateArguments(json.RawMessage(`{"q":"x"}`)); err != nil {
		t.Errorf("the client-facing schema still requires the hidden parameter: %v", err)
	}
	if other, _ := cat.Resolve("orders__get_order"); other == nil || other.Override != nil {
		t.Errorf("a tool without an override: %+v", other)
	}
}

// An override that does not fit its upstream quarantines that tool alone,
// with the reason; a renamed tool that collides quarantines every claimant.
func TestCatalogQuarantinesBadOverrides(t *testing.T) {
	srv := &Server{Name: "orders", ToolPrefix: "orders__", Overrides: map[string]*overrides.Override{
		"search":    {Hide: map[string]json.RawMessage{"region": json.RawMessage(`"eu"`)}},
		"get_order": {Name: "lookup"},
	}}
	files := &Server{Name: "files", Overrides: map[string]*overrides.Override{"read": {Name: "lookup"}}}
	cat, err := Build(servers(srv, files), map[string][]Listed{"orders": {searchTool(), orderTool()}, "files": listed("read", "write")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, q := range cat.Quarantined() {
		reasons[q.Server+"/"+q.Upstream] = q.Reason
	}
	for id, want := range map[string]string{
		"orders/search":    `tool override (mcpServers.orders.tools.search.override): override.hide: parameter "region" is not in the upstream's input schema (its parameters: q, shop)`,
		"orders/get_order": `client-facing name "lookup" is claimed by files/read and orders/get_order; give the tools distinct names`,
		"files/read":       `client-facing name "lookup" is claimed by`,
	} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("%s quarantined for %q, want %q", id, reasons[id], want)
		}
	}
	if len(cat.Tools()) != 1 || cat.Tools()[0].Name != "write" {
		t.Errorf("callable: %d tools", len(cat.Tools()))
	}
}

// The pin is of the upstream's definition: an override does not change
// the hash, and a change upstream still blocks the renamed tool.
func TestCatalogPinsCoverTheUpstreamDefinition(t *testing.T) {
	desc := "Operator's words."
	over := map[string]*overrides.Override{"get_order": {Name: "order", Description: &desc}}
	build := func(store *pins.Store, ov map[string]*overrides.Override, l Listed) *Catalog {
		cat, err := BuildWith(servers(&Server{Name: "orders", ToolPrefix: "orders__", Overrides: ov}),
			map[string][]Listed{"orders": {l}}, nil, BuildOptions{Pins: store})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	store, _ := openPins(t, pins.TOFU)
	plain := build(store, nil, orderTool()).Tools()[0]
	overridden := build(store, over, orderTool()).Tools()[0]
	if overridden.Name != "order" || overridden.Description != desc || overridden.Hash != plain.Hash {
		t.Fatalf("overridden %q %q hash %s, plain hash %s", overridden.Name, overridden.Description, overridden.Hash, plain.Hash)
	}
	changed := orderTool()
	changed.Description += " Also deletes it."
	cat := build(store, over, changed)
	if len(cat.Tools()) != 0 || len(cat.Changed()) != 1 || cat.Changed()[0].Name != "order" {
		t.Fatalf("a changed upstream: %d callable, changed %+v", len(cat.Tools()), cat.Changed())
	}
	if tool, ok := cat.Resolve("order"); !ok || !tool.Changed {
		t.Errorf("Resolve(order) = %+v, %v; want a Changed stand-in", tool, ok)
	}
}

// While its server is down, a renamed tool answers to its new name (as
// unreachable, not as unknown), and not to its old one.
func TestCatalogRenamedToolOfADownServer(t *testing.T) {
	srv := &Server{Name: "orders", ToolPrefix: "orders__", Overrides: map[string]*overrides.Override{"search": {Name: "find_orders"}}}
	cat, err := Build(servers(srv), nil, map[string]string{"orders": "exited"})
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cat.Resolve("find_orders")
	if !ok || !tool.Unreachable || tool.Guessed || tool.ID != "orders/search" || tool.Upstream != "search" {
		t.Errorf("Resolve(find_orders) = %+v, %v", tool, ok)
	}
	if tool, ok := cat.Resolve("orders__search"); ok {
		t.Errorf("the old name resolves while the server is down: %+v", tool)
	}
	if tool, ok := cat.Resolve("orders__get_order"); !ok || !tool.Unreachable || !tool.Guessed {
		t.Errorf("another tool of the down server: %+v, %v", tool, ok)
	}
}
