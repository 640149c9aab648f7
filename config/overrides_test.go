package config

import (
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/upstreams"
)

func TestToolOverrideDecodes(t *testing.T) {
	src := `mcpServers:
  orders:
    command: orders
    tools:
      search:
        retry_safe: true
        override:
          name: find_orders
          description_append: "Only orders of the EU shop."
          annotations: {readOnlyHint: true}
          hide: {shop: eu, limit: 9007199254740993, opts: {deep: [1, "x", null]}}
          narrow:
            status: {enum: [open, shipped]}
`
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Servers["orders"].Tools["search"].Override
	if o == nil || o.Name != "find_orders" || o.Description != nil || o.DescriptionAppend != "Only orders of the EU shop." {
		t.Fatalf("override %+v", o)
	}
	if o.Annotations == nil || o.Annotations.ReadOnlyHint == nil || !*o.Annotations.ReadOnlyHint || o.Annotations.DestructiveHint != nil {
		t.Errorf("annotations %+v", o.Annotations)
	}
	for k, want := range map[string]string{"shop": `"eu"`, "limit": "9007199254740993", "opts": `{"deep":[1,"x",null]}`} {
		if got := string(o.Hide[k]); got != want {
			t.Errorf("hide.%s = %s, want %s", k, got, want)
		}
	}
	if got := string(o.Narrow["status"]); got != `{"enum":["open","shipped"]}` {
		t.Errorf("narrow.status = %s", got)
	}
}

func TestToolOverrideProblems(t *testing.T) {
	const head = "mcpServers:\n  a:\n    command: a\n    tools:\n      t:\n        override:\n"
	tests := []struct {
		name, src string
		line      int
		key, want string
	}{
		{"bad name", head + "          name: \"find orders\"\n", 7, "mcpServers.a.tools.t.override.name", "expected a tool name of 1 to 64"},
		{"name twice", "mcpServers:\n  a:\n    command: a\n    tools:\n      t: {override: {name: x}}\n  b:\n    command: b\n    tools:\n      u: {override: {name: x}}\n",
			9, "mcpServers.b.tools.u.override.name", `"x" is also given at mcpServers.a.tools.t.override.name`},
		{"both descriptions", head + "          description: a\n          description_append: b\n", 8, "mcpServers.a.tools.t.override.description_append", "not both"},
		{"hidden and narrowed", head + "          hide: {p: 1}\n          narrow: {p: {enum: [1]}}\n", 8, "mcpServers.a.tools.t.override.narrow.p", "cannot be narrowed too"},
		{"narrow not a schema", head + "          narrow: {p: [1, 2]}\n", 7, "mcpServers.a.tools.t.override.narrow.p", "expected a JSON Schema fragment (a mapping"},
		{"narrow a bad schema", head + "          narrow: {p: {type: 12}}\n", 7, "mcpServers.a.tools.t.override.narrow.p", "expected a JSON Schema fragment: schema rejected"},
		{"unknown key", head + "          rename: x\n", 7, "mcpServers.a.tools.t.override.rename", "allowed keys here: annotations, description, description_append, hide, name, narrow, title"},
		{"annotation not a bool", head + "          annotations: {readOnlyHint: yes please}\n", 7, "mcpServers.a.tools.t.override.annotations.readOnlyHint", "expected true or false"},
		{"unknown annotation", head + "          annotations: {readonly: true}\n", 7, "mcpServers.a.tools.t.override.annotations.readonly", "unknown key"},
		{"empty path step", head + "          hide: {options..dry_run: true}\n", 7, `mcpServers.a.tools.t.override.hide["options..dry_run"]`, "names joined with dots for a nested one"},
		{"path ends in a dot", head + "          narrow: {\"options.\": {enum: [1]}}\n", 7, `mcpServers.a.tools.t.override.narrow["options."]`, `got "options."`},
		{"hidden inside hidden", head + "          hide: {options: {dry_run: true}, options.dry_run: false}\n", 7, `mcpServers.a.tools.t.override.hide["options.dry_run"]`, `is inside "options", which is hidden already`},
		{"narrowed inside hidden", head + "          hide: {options: {}}\n          narrow: {options.level: {enum: [low]}}\n", 8, `mcpServers.a.tools.t.override.narrow["options.level"]`, `clients cannot send it`},
		{"discovery tool name", head + "          name: toolgate__search_tools\n", 7, "mcpServers.a.tools.t.override.name", "that prefix is the gateway's own tools'"},
		{"fixed value .inf", head + "          hide: {p: .inf}\n", 7, "mcpServers.a.tools.t.override.hide.p", "expected a JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, nil)
			if len(probs) != 1 {
				t.Fatalf("want one problem, got %v", probs)
			}
			p := probs[0]
			if p.Line != tt.line || p.Key != tt.key || !strings.Contains(p.Msg, tt.want) {
				t.Errorf("got %d %s %q; want %d %s containing %q", p.Line, p.Key, p.Msg, tt.line, tt.key, tt.want)
			}
		})
	}
}

// The worked example of docs/configuration.md, "Tool overrides", loads.
func TestToolOverridesDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Tool overrides\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Tool overrides" section`)
	}
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(block), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Servers["orders"].Tools["search_orders"].Override
	if o == nil || o.Name != "find_orders" || string(o.Hide["page_size"]) != "50" || string(o.Narrow["status"]) != `{"enum":["open","shipped"]}` {
		t.Fatalf("override %+v", o)
	}
	_, nested, ok := strings.Cut(section, "\n### Nested parameters\n")
	if !ok {
		t.Fatal(`docs/configuration.md, "Tool overrides", has no "### Nested parameters"`)
	}
	_, block, _ = strings.Cut(nested, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if c, err = Parse("/srv/tg/toolgate.yaml", []byte(block), envOf(nil)); err != nil {
		t.Fatal(err)
	}
	o = c.Servers["ci"].Tools["deploy"].Override
	if o == nil || string(o.Hide["options.dry_run"]) != "true" || string(o.Hide["target.region"]) != `"eu"` || string(o.Narrow["options.level"]) != `{"enum":["low","mid"]}` {
		t.Fatalf("nested override %+v", o)
	}
}

// Every name of the gateway's own tools starts with the prefix an override name may not take, so
// that a rename onto one is refused when the file loads, not only when the server lists its tools.
func TestReservedToolPrefixCoversDiscoveryTools(t *testing.T) {
	for _, name := range upstreams.ReservedToolNames {
		if !strings.HasPrefix(name, reservedToolPrefix) {
			t.Errorf("%s does not start with %s", name, reservedToolPrefix)
		}
	}
}
