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
		"orders/search":    `tool override (mcpServers.orders.tools.search.override): override.hide.region: "region" is not a property of the upstream's input schema (its properties: q, shop)`,
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

// A rename onto the client-facing name of another server's tool quarantines
// both; a rename onto a discovery meta-tool's name (which the config
// refuses, so only a catalog built without it can get here) quarantines the
// tool; an override of a tool the server does not list is a warning that
// names the key.
func TestCatalogReportsOverrideNameProblems(t *testing.T) {
	srv := &Server{Name: "orders", ToolPrefix: "orders__", Overrides: map[string]*overrides.Override{
		"search":      {Name: "files__read"},
		"get_order":   {Name: "toolgate__call_tool"},
		"cancel":      {Name: "stop_order"},
		"old_listing": {DescriptionAppend: "x"},
	}}
	files := &Server{Name: "files", ToolPrefix: "files__"}
	cat, err := Build(servers(srv, files), map[string][]Listed{"orders": {searchTool(), orderTool()}, "files": listed("read", "write")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, q := range cat.Quarantined() {
		reasons[q.Server+"/"+q.Upstream] = q.Reason
	}
	for id, want := range map[string]string{
		"orders/search":    `client-facing name "files__read" is claimed by files/read and orders/search; give the tools distinct names (mcpServers.<server>.tools.<tool>.override.name)`,
		"files/read":       `client-facing name "files__read" is claimed by`,
		"orders/get_order": `client-facing name "toolgate__call_tool" is the gateway's own discovery tool`,
	} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("%s quarantined for %q, want %q", id, reasons[id], want)
		}
	}
	want := []string{
		`mcpServers.orders.tools.cancel.override: server orders lists no tool "cancel", so the override applies to nothing and "stop_order" answers tool_not_found`,
		`mcpServers.orders.tools.old_listing.override: server orders lists no tool "old_listing", so the override applies to nothing`,
	}
	if got := cat.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tools := cat.Tools(); len(tools) != 1 || tools[0].Name != "files__write" {
		t.Errorf("callable: %d tools", len(tools))
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
