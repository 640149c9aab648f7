package overrides

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/toolschema"
)

const search = `{"type":"object","properties":{
	"query":{"type":"string"},
	"shop":{"type":"string","enum":["eu","us"]},
	"limit":{"type":"integer","maximum":9007199254740993},
	"status":{"$ref":"#/$defs/status"}},
	"required":["query","shop"],
	"$defs":{"status":{"type":"string","enum":["open","shipped","cancelled"]}}}`

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestApplyHidesAndNarrows(t *testing.T) {
	a, err := Apply(&Override{
		Hide:   map[string]json.RawMessage{"shop": raw(`"eu"`), "limit": raw(`9007199254740993`)},
		Narrow: map[string]json.RawMessage{"status": raw(`{"enum":["open","shipped"]}`)},
	}, raw(search))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]json.RawMessage
		Required   []string
	}
	if err := json.Unmarshal(a.Schema, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Properties["shop"]; ok {
		t.Errorf("hidden shop still in properties: %s", a.Schema)
	}
	if _, ok := s.Properties["limit"]; ok {
		t.Errorf("hidden limit still in properties: %s", a.Schema)
	}
	if strings.Join(s.Required, ",") != "query" {
		t.Errorf("required %v, want [query]", s.Required)
	}
	if got := string(s.Properties["status"]); got != `{"allOf":[{"$ref":"#/$defs/status"},{"enum":["open","shipped"]}]}` {
		t.Errorf("narrowed status %s", got)
	}
	if got := a.Hidden(); strings.Join(got, ",") != "limit,shop" {
		t.Errorf("Hidden() = %v", got)
	}
	// The client-facing schema accepts the narrowed values only, and does not need the hidden ones.
	for args, ok := range map[string]bool{
		`{"query":"x"}`: true, `{"query":"x","status":"open"}`: true,
		`{"query":"x","status":"cancelled"}`: false, `{"query":"x","status":"lost"}`: false,
	} {
		if err := a.Input.ValidateArguments(raw(args)); (err == nil) != ok {
			t.Errorf("client schema on %s: %v, want ok=%v", args, err, ok)
		}
	}
}

func TestApplyRefusesWhatDoesNotFit(t *testing.T) {
	tests := []struct {
		name string
		o    Override
		want string
	}{
		{"hidden parameter the upstream lacks", Override{Hide: map[string]json.RawMessage{"region": raw(`"eu"`)}},
			`override.hide.region: "region" is not a property of the upstream's input schema (its properties: limit, query, shop, status)`},
		{"fixed value the upstream refuses", Override{Hide: map[string]json.RawMessage{"shop": raw(`"asia"`)}},
			`override.hide.shop: the fixed value "asia" does not fit the upstream's schema for it`},
		{"fixed value of the wrong type", Override{Hide: map[string]json.RawMessage{"limit": raw(`"10"`)}},
			`override.hide.limit: the fixed value "10" does not fit`},
		{"fixed value over a big maximum", Override{Hide: map[string]json.RawMessage{"limit": raw(`9007199254740994`)}},
			`override.hide.limit: the fixed value 9007199254740994 does not fit`},
		{"narrowed parameter the upstream lacks", Override{Narrow: map[string]json.RawMessage{"region": raw(`{"enum":["eu"]}`)}},
			`override.narrow.region: "region" is not a property of the upstream's input schema`},
		{"enum value the upstream refuses", Override{Narrow: map[string]json.RawMessage{"status": raw(`{"enum":["open","lost"]}`)}},
			`override.narrow.status: "lost" is not a value the upstream accepts for it`},
		{"empty enum", Override{Narrow: map[string]json.RawMessage{"status": raw(`{"enum":[]}`)}},
			`override.narrow.status: enum must be a non-empty list`},
		{"const the upstream refuses", Override{Narrow: map[string]json.RawMessage{"shop": raw(`{"const":"asia"}`)}},
			`override.narrow.shop: "asia" is not a value the upstream accepts`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Apply(&tt.o, raw(search))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	a, err := Apply(&Override{Hide: map[string]json.RawMessage{"shop": raw(`"eu"`), "limit": raw(`9007199254740993`)}}, raw(search))
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Check(raw(` {"query": "x",  "n": 12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	// The client's bytes stay as sent (big numbers too); the fixed values follow, sorted.
	if want := `{"query": "x",  "n": 12345678901234567890,"limit":9007199254740993,"shop":"eu"}`; string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	// The final arguments are checked against the upstream's own schema: query is still required.
	var v *toolschema.Violation
	if _, err := a.Check(nil); !errors.As(err, &v) || !strings.Contains(v.Message, "query") {
		t.Errorf("empty arguments: %v", err)
	}
	// A value the client sends for a hidden parameter, escaped or sent twice, is replaced by the operator's.
	for args, want := range map[string]string{
		`{"query":"x","shop":"us"}`:               `{"query":"x","shop":"eu","limit":9007199254740993}`,
		`{"query":"x","\u0073hop":"us"}`:          `{"query":"x","\u0073hop":"eu","limit":9007199254740993}`,
		`{"shop":"us","query":"x","shop":"asia"}`: `{"query":"x","limit":9007199254740993,"shop":"eu"}`,
	} {
		if got, err := a.Check(raw(args)); err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", args, got, err, want)
		}
	}
	b, err := Apply(&Override{Hide: map[string]json.RawMessage{"shop": raw(`"eu"`)}},
		raw(`{"type":"object","properties":{"shop":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{``, `null`, `{}`, ` { } `} {
		if got, err := b.Check(raw(in)); err != nil || string(got) != `{"shop":"eu"}` {
			t.Errorf("Check(%q) = %s, %v", in, got, err)
		}
	}
}

func TestDescribeAndAnnotate(t *testing.T) {
	repl, yes, no := "Find orders.", true, false
	if got := (&Override{Description: &repl}).Describe("Search."); got != repl {
		t.Errorf("replace: %q", got)
	}
	if got := (&Override{DescriptionAppend: "EU only."}).Describe("Search."); got != "Search.\n\nEU only." {
		t.Errorf("append: %q", got)
	}
	if got := (&Override{DescriptionAppend: "EU only."}).Describe(""); got != "EU only." {
		t.Errorf("append to nothing: %q", got)
	}
	a := (&Override{ReadOnlyHint: &yes, DestructiveHint: &no}).Annotate(mcp.ToolAnnotation{Title: "t", DestructiveHint: &yes, OpenWorldHint: &yes})
	if a.Title != "t" || !*a.ReadOnlyHint || *a.DestructiveHint || !*a.OpenWorldHint || a.IdempotentHint != nil {
		t.Errorf("annotations %+v", a)
	}
}
