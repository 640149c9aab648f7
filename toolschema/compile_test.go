package toolschema

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompileRejects(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		lim    Limits
		reason string // substring of Rejected.Reason
	}{
		{"not JSON", `{"type":`, Limits{}, "not valid JSON"},
		{"trailing data", `{} {}`, Limits{}, "not valid JSON: unexpected data after the top-level value"},
		{"top level array", `[{"type":"object"}]`, Limits{}, "top-level schema must be a JSON object, got array"},
		{"top level true", `true`, Limits{}, "top-level schema must be a JSON object, got boolean"},
		{"top level string", `"object"`, Limits{}, "top-level schema must be a JSON object, got string"},
		{"too big", manyProps(50), Limits{MaxBytes: 100}, "bytes, over the limit of 100 bytes"},
		{"too big by default", manyProps(20000), Limits{MaxNodes: 1 << 20}, "over the limit of 262144 bytes"},
		{"too deep: 1000-deep allOf", nested(1000, `{}`), Limits{}, "nested deeper than 64 levels at /allOf/0/allOf/0"},
		{"too deep: custom limit", nested(3, `{}`), Limits{MaxDepth: 4}, "nested deeper than 4 levels"},
		{"too many nodes", manyProps(200), Limits{MaxNodes: 100}, "more than 100 JSON values"},
		{"too many nodes by default", manyProps(10001), Limits{}, "more than 20000 JSON values"},
		{"too many refs", manyRefs(11), Limits{MaxRefs: 10}, "more than 10 $ref/$dynamicRef/$recursiveRef"},
		{"too many refs by default", manyRefs(257), Limits{}, "more than 256 $ref"},
		{"duplicate key", `{"type":"object","type":"string"}`, Limits{}, `duplicate key "type" at /type`},
		{"huge exponent", `{"type":"number","maximum":1e999999}`, Limits{}, "number 1e999999 at /maximum is out of the supported range"},
		{"remote $ref", `{"type":"object","properties":{"a":{"$ref":"https://x/y.json"}}}`, Limits{},
			`$ref "https://x/y.json" at /properties/a: only local fragment refs (#/...) are allowed`},
		{"file $ref", `{"$ref":"file:///etc/passwd"}`, Limits{}, `$ref "file:///etc/passwd" at the top level: only local fragment refs`},
		{"relative file $ref", `{"properties":{"a":{"$ref":"other.json#/x"}}}`, Limits{}, `$ref "other.json#/x" at /properties/a: only local`},
		{"relative path $ref", `{"properties":{"a":{"$ref":"defs/a"}}}`, Limits{}, `$ref "defs/a" at /properties/a: only local`},
		{"remote $dynamicRef", `{"$dynamicRef":"https://x/y.json#meta"}`, Limits{}, `$dynamicRef "https://x/y.json#meta" at the top level: only local`},
		{"$ref target missing", `{"properties":{"a":{"$ref":"#/$defs/nope"}}}`, Limits{}, `$ref "#/$defs/nope" at /properties/a: target not found`},
		{"$ref anchor missing", `{"$ref":"#nope"}`, Limits{}, `$ref "#nope" at the top level: target not found`},
		{"$ref index with leading zero", `{"allOf":[{}],"properties":{"a":{"$ref":"#/allOf/00"}}}`, Limits{}, "target not found"},
		{"self $ref at root", `{"$ref":"#"}`, Limits{}, "cyclic $ref: # -> #"},
		{"self $ref via anchor", `{"$anchor":"me","$ref":"#me"}`, Limits{}, "cyclic $ref: # -> #"},
		{"alias cycle", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, Limits{}, "cyclic $ref: #/$defs/a -> #/$defs/b -> #/$defs/a"},
		{"alias cycle reached from a property", `{"properties":{"p":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, Limits{}, "cyclic $ref"},
		{"cycle through anyOf", `{"type":"object","anyOf":[{"type":"string"},{"$ref":"#"}]}`, Limits{}, "cyclic $ref: #/anyOf/1 -> # -> #/anyOf/1"},
		{"cycle through not", `{"$defs":{"a":{"not":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, Limits{}, "cyclic $ref"},
		{"cycle next to a real keyword", `{"type":"object","$ref":"#"}`, Limits{}, "cyclic $ref: # -> #"},
		{"remote $id", `{"$id":"https://example.com/tool.json","type":"object"}`, Limits{},
			`$id "https://example.com/tool.json" at the top level: only fragment ids (#name) are allowed`},
		{"relative $id in a subschema", `{"properties":{"a":{"$id":"a.json"}}}`, Limits{}, `$id "a.json" at /properties/a: only fragment ids`},
		{"draft-04 remote id", `{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://x/y","type":"object"}`, Limits{}, `id "http://x/y" at the top level: only fragment ids`},
		{"unknown dialect", `{"$schema":"https://example.com/my-dialect","type":"object"}`, Limits{}, `$schema "https://example.com/my-dialect" at the top level: unsupported dialect`},
		{"dialect with fragment", `{"$schema":"https://json-schema.org/draft/2020-12/schema#x","type":"object"}`, Limits{}, "unsupported dialect"},
		{"dialect in a subschema", `{"properties":{"a":{"$schema":"file:///etc/passwd"}}}`, Limits{}, `$schema "file:///etc/passwd" at /properties/a: unsupported dialect`},
		{"DAG fan-out bomb", dagBomb(20), Limits{}, "/properties/x could apply more than 1000 subschemas to a single value"},
		{"recursion that doubles per level", `{"type":"object","allOf":[{"properties":{"x":{"$ref":"#"}}},{"properties":{"x":{"$ref":"#"}}}]}`, Limits{}, "a single value at nesting depth 8 could need more than 1000 subschema evaluations"},
		{"wide in-place fan-out", `{"type":"object","properties":{"x":{"anyOf":[` + strings.Repeat(`{"$ref":"#/$defs/a"},`, 200) + `{}]}},"$defs":{"a":{"allOf":[{},{},{},{},{}]}}}`, Limits{}, "/properties/x could apply more than 1000 subschemas to a single value"},
		{"fan-out analysis too costly", costlyToAnalyse(), Limits{MaxRefs: 5000}, "too complex to bound its validation cost"},
		{"bad keyword type", `{"type":"object","properties":{"a":{"type":"strin"}}}`, Limits{}, `not a valid JSON Schema: "/properties/a/type"`},
		{"bad regex", `{"type":"object","properties":{"a":{"type":"string","pattern":"(("}}}`, Limits{}, `not a valid JSON Schema: "/properties/a/pattern": must be a valid regex`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tt.schema), tt.lim)
			if err == nil {
				t.Fatalf("Compile succeeded (%v), want rejection containing %q", s, tt.reason)
			}
			r := asRejected(t, err)
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("Reason = %q\nwant it to contain %q", r.Reason, tt.reason)
			}
			if strings.Contains(r.Error(), resourceURL) || strings.Contains(r.Error(), "toolgate:") {
				t.Errorf("Reason leaks the internal resource URL: %q", r.Reason)
			}
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	tests := []struct{ name, schema string }{
		{"empty object schema", `{}`},
		{"typical tool input", `{"type":"object","properties":{"order_id":{"type":"integer"},"note":{"type":"string"}},"required":["order_id"]}`},
		{"$defs and local refs", `{"type":"object","$defs":{"id":{"type":"string","minLength":1}},"properties":{"a":{"$ref":"#/$defs/id"},"b":{"$ref":"#/$defs/id"}}}`},
		{"percent-encoded pointer", `{"type":"object","$defs":{"a b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a%20b"}}}`},
		{"escaped pointer", `{"type":"object","$defs":{"a/b~c":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a~1b~0c"}}}`},
		{"anchor ref", `{"type":"object","$defs":{"s":{"$anchor":"str","type":"string"}},"properties":{"x":{"$ref":"#str"}}}`},
		{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`},
		{"root recursion through properties", `{"type":"object","properties":{"next":{"$ref":"#"}}}`},
		{"binary tree with nullable children", `{"$defs":{"n":{"type":"object","properties":{"l":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]},"r":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}}}},"$ref":"#/$defs/n"}`},
		{"recursive filter union", `{"type":"object","properties":{"where":{"$ref":"#/$defs/f"}},"$defs":{"f":{"anyOf":[{"type":"object","properties":{"and":{"type":"array","items":{"$ref":"#/$defs/f"}}}},{"type":"object","properties":{"or":{"type":"array","items":{"$ref":"#/$defs/f"}}}},{"type":"object","properties":{"not":{"$ref":"#/$defs/f"}}},{"type":"object","properties":{"field":{"type":"string"},"eq":{}}}]}}}`},
		{"any JSON value", `{"type":"object","properties":{"v":{"$ref":"#/$defs/json"}},"$defs":{"json":{"anyOf":[{"type":["string","number","boolean","null"]},{"type":"array","items":{"$ref":"#/$defs/json"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/json"}}]}}}`},
		{"draft-07 definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"x":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/x"}}}`},
		{"draft-07 fragment $id", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"x":{"$id":"#x","type":"string"}},"properties":{"a":{"$ref":"#x"}}}`},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"id":{"type":"string"}}}`},
		{"2019-09 recursive ref", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object","properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}}}}`},
		{"2020-12 dynamic ref", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}}}}`},
		{"property named $ref", `{"type":"object","properties":{"$ref":{"type":"string"},"$id":{"type":"string"}}}`},
		{"limits are not off by one", nested(31, `{"type":"object"}`)},
		{"256 refs", manyRefs(256)},
		{"large integer bound", `{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Compile(json.RawMessage(tt.schema), Limits{}); err != nil {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
}

// The depth cap must stop a 1000-deep allOf before the compiler, which
// would spend seconds on it. The reason proves which stage refused it;
// BenchmarkCompileDeepAllOf shows the cost.
func TestDeepAllOfRejectedBeforeCompile(t *testing.T) {
	_, err := Compile(json.RawMessage(nested(1000, `{"type":"object"}`)), Limits{})
	r := asRejected(t, err)
	if !strings.HasPrefix(r.Reason, "nested deeper than 64 levels") {
		t.Fatalf("Reason = %q, want the depth pre-check", r.Reason)
	}
}

// The loader is the second line of defence behind the pre-check: even a
// document the pre-check never saw cannot make the compiler load anything.
func TestCompilerNeverLoads(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "https://example.com/s.json", "other.json"} {
		doc := map[string]any{"$ref": ref}
		if _, err := compileDoc(doc); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("compileDoc with $ref %q: err = %v, want the loader's refusal", ref, err)
		}
	}
	if _, err := (refuseLoader{}).Load("file:///etc/hostname"); err == nil {
		t.Error("refuseLoader loaded a file")
	}
}

// "format" is an annotation in every dialect, including draft-07 where the
// compiler would assert it by default.
func TestFormatIsAnnotation(t *testing.T) {
	for _, dialect := range []string{"", `"$schema":"http://json-schema.org/draft-07/schema#",`} {
		s := mustCompile(t, `{`+dialect+`"type":"object","properties":{"e":{"type":"string","format":"email"},"d":{"type":"string","format":"date-time"}}}`)
		if err := s.ValidateArguments(json.RawMessage(`{"e":"not an email","d":"yesterday"}`)); err != nil {
			t.Errorf("dialect %q: format was asserted: %v", dialect, err)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := Limits{}.withDefaults()
	want := Limits{MaxBytes: 256 << 10, MaxDepth: 64, MaxNodes: 20000, MaxRefs: 256}
	if got != want {
		t.Errorf("Limits{}.withDefaults() = %+v, want %+v", got, want)
	}
	custom := Limits{MaxBytes: 1, MaxDepth: 2, MaxNodes: 3, MaxRefs: 4}
	if custom.withDefaults() != custom {
		t.Errorf("explicit limits were overridden: %+v", custom.withDefaults())
	}
}
