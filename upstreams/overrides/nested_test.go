package overrides

import (
	"encoding/json"
	"strings"
	"testing"
)

// deploy has parameters nested in objects: options inline, target through
// a local $ref that another parameter (fallback) shares, files an array of
// objects, mode a oneOf, and again a $ref to another property (which the gateway
// does not follow).
const deploy = `{"type":"object","properties":{
	"name":{"type":"string"},
	"options":{"type":"object","properties":{
		"dry_run":{"type":"boolean"},
		"level":{"type":"string","enum":["low","mid","high"]},
		"limits":{"type":"object","properties":{"cpu":{"type":"integer","minimum":1}},"required":["cpu"]}},
		"required":["dry_run"],"additionalProperties":false},
	"target":{"$ref":"#/$defs/place"},
	"fallback":{"$ref":"#/$defs/place"},
	"files":{"type":"array","items":{"type":"object","properties":{"mode":{"type":"string"}}}},
	"mode":{"oneOf":[{"type":"object","properties":{"fast":{"type":"boolean"}}},{"type":"string"}]},
	"again":{"$ref":"#/properties/options"},
	"a.b":{"type":"string"}},
	"required":["name","options"],"additionalProperties":false,
	"$defs":{"place":{"type":"object","properties":{"region":{"type":"string","enum":["eu","us"]},"zone":{"type":"string"}},"additionalProperties":false}}}`

func TestApplyNestedPaths(t *testing.T) {
	a, err := Apply(&Override{
		Hide:   map[string]json.RawMessage{"options.dry_run": raw(`true`), "target.region": raw(`"eu"`), "a.b": raw(`"x"`)},
		Narrow: map[string]json.RawMessage{"options.level": raw(`{"enum":["low","mid"]}`), "options": raw(`{"maxProperties":2}`)},
	}, raw(deploy))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Hidden(), ","); got != "a.b,options.dry_run,target.region" {
		t.Errorf("Hidden() = %s", got)
	}
	var s struct {
		Properties struct {
			Options  map[string]any
			Target   map[string]any
			Fallback map[string]any
			AB       any `json:"a.b"`
		}
	}
	if err := json.Unmarshal(a.Schema, &s); err != nil {
		t.Fatal(err)
	}
	schema := string(a.Schema)
	// options is narrowed as a whole (allOf) around its own rewritten schema: dry_run gone from its
	// properties and required, level narrowed inside it.
	inner := s.Properties.Options["allOf"].([]any)[0].(map[string]any)
	props := inner["properties"].(map[string]any)
	if _, shown := props["dry_run"]; shown || inner["required"] != nil {
		t.Errorf("options.dry_run still shown: %s", schema)
	}
	if lv, _ := json.Marshal(props["level"]); string(lv) != `{"allOf":[{"enum":["low","mid","high"],"type":"string"},{"enum":["low","mid"]}]}` {
		t.Errorf("options.level %s", lv)
	}
	// target's $ref became a copy of the definition without region; fallback, which shares the
	// definition, keeps its $ref and so its region.
	if tp, _ := json.Marshal(s.Properties.Target); string(tp) != `{"additionalProperties":false,"properties":{"zone":{"type":"string"}},"type":"object"}` {
		t.Errorf("target %s", tp)
	}
	if s.Properties.Fallback["$ref"] != "#/$defs/place" || s.Properties.AB != nil {
		t.Errorf("fallback or a.b: %s", schema)
	}
	for args, ok := range map[string]bool{
		`{"name":"x","options":{}}`:                       true,
		`{"name":"x","options":{"level":"high"}}`:         false,
		`{"name":"x","options":{},"target":{"zone":"a"}}`: true,
	} {
		if err := a.Input.ValidateArguments(raw(args)); (err == nil) != ok {
			t.Errorf("client schema on %s: %v, want ok=%v", args, err, ok)
		}
	}
}

func TestCheckNested(t *testing.T) {
	a, err := Apply(&Override{Hide: map[string]json.RawMessage{"options.dry_run": raw(`true`), "target.region": raw(`"eu"`)},
		Narrow: map[string]json.RawMessage{"options.level": raw(`{"enum":["low","mid"]}`)}}, raw(deploy))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want, err string }{
		// The objects on the way are created when the client leaves them out...
		{`{"name":"x"}`, `{"name":"x","options":{"dry_run":true},"target":{"region":"eu"}}`, ""},
		// ... entered where it sent them, its bytes kept...
		{`{"name":"x", "options": {"level": "low"}, "target": null}`, `{"name":"x", "options": {"level": "low","dry_run":true}, "target": {"region":"eu"}}`, ""},
		// ... and a value it sends at a hidden path is replaced by the operator's.
		{`{"name":"x","options":{"dry_run":false,"level":"mid"},"target":{"region":"us","zone":"b"}}`,
			`{"name":"x","options":{"dry_run":true,"level":"mid"},"target":{"region":"eu","zone":"b"}}`, ""},
		{`{"name":"x","options":{"level":"high"}}`, "", "level"},
		{`{"name":"x","options":"fast"}`, "", `argument "options" must be an object`},
		{`{"name":"x","options":{},"options":{}}`, "", `argument "options" is sent more than once`},
	} {
		got, err := a.Check(raw(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %s, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", c.in, got, err, c.want)
		}
	}
}

// Each path the gateway cannot rewrite safely quarantines the tool with a
// reason that names the path, what is there and what would be needed.
func TestApplyRefusesNestedPaths(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Override
		want string
	}{
		{"missing nested property", Override{Hide: map[string]json.RawMessage{"options.force": raw(`true`)}},
			`override.hide.options.force: "force" is not a property of the schema of "options" (its properties: dry_run, level, limits)`},
		{"missing first step", Override{Hide: map[string]json.RawMessage{"opts.dry_run": raw(`true`)}},
			`override.hide.opts.dry_run: "opts" is not a property of the upstream's input schema`},
		{"through a scalar", Override{Hide: map[string]json.RawMessage{"name.first": raw(`"a"`)}},
			`override.hide.name.first: "name" is not an object in the upstream's schema (type string)`},
		{"across an array", Override{Hide: map[string]json.RawMessage{"files.mode": raw(`"r"`)}},
			`override.hide.files.mode: "files" is an array in the upstream's schema: a path cannot cross an array`},
		{"into a oneOf", Override{Narrow: map[string]json.RawMessage{"mode.fast": raw(`{"const":true}`)}},
			`override.narrow.mode.fast: the schema of "mode" uses oneOf, which the gateway does not rewrite`},
		{"into a $ref to a property", Override{Hide: map[string]json.RawMessage{"again.dry_run": raw(`true`)}},
			`override.hide.again.dry_run: the schema of "again" is $ref "#/properties/options", which the gateway does not follow (only #/$defs/<name> and #/definitions/<name> of the same schema)`},
		{"fixed value the nested schema refuses", Override{Hide: map[string]json.RawMessage{"target.region": raw(`"asia"`)}},
			`override.hide.target.region: the fixed value "asia" does not fit the upstream's schema for it`},
		{"fixed value below a nested minimum", Override{Hide: map[string]json.RawMessage{"options.limits.cpu": raw(`0`)}},
			`override.hide.options.limits.cpu: the fixed value 0 does not fit`},
		{"nested enum value the upstream refuses", Override{Narrow: map[string]json.RawMessage{"options.level": raw(`{"enum":["low","max"]}`)}},
			`override.narrow.options.level: "max" is not a value the upstream accepts for it`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Apply(&c.o, raw(deploy))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}

// A definition whose only $ref was copied in place (and the hidden
// parameter removed from the copy) leaves the listed schema; one still
// referenced stays; with a $ref the pruning cannot follow, every
// definition stays.
func TestApplyPrunesUnreachedDefinitions(t *testing.T) {
	for _, c := range []struct{ name, schema, kept, gone string }{
		{"only use copied", `{"type":"object","properties":{"target":{"$ref":"#/$defs/place"}},
			"$defs":{"place":{"type":"object","properties":{"region":{"type":"string"},"zone":{"$ref":"#/$defs/zone"}}},"zone":{"type":"string"},"unused":{"type":"integer"}}}`,
			`"zone":{"type":"string"}`, `"place"`},
		{"another use", `{"type":"object","properties":{"target":{"$ref":"#/$defs/place"},"fallback":{"$ref":"#/$defs/place"}},
			"$defs":{"place":{"type":"object","properties":{"region":{"type":"string"}}}}}`,
			`"place":{`, ""},
		{"a pointer the pruning cannot follow", `{"type":"object","properties":{"target":{"$ref":"#/$defs/place"},"other":{"$ref":"#/$defs/place/properties/region"}},
			"$defs":{"place":{"type":"object","properties":{"region":{"type":"string"}}}}}`,
			`"place":{`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := Apply(&Override{Hide: map[string]json.RawMessage{"target.region": raw(`"eu"`)}}, raw(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			s := string(a.Schema)
			if !strings.Contains(s, c.kept) || (c.gone != "" && strings.Contains(s, c.gone)) || strings.Contains(s, "unused") {
				t.Errorf("schema %s: want %s kept, %q gone", s, c.kept, c.gone)
			}
		})
	}
}
