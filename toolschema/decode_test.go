package toolschema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		lim      decodeLimits
		wantKind decodeErrKind
		wantPtr  string
		ok       bool
	}{
		{name: "object", in: `{"a":[1,{"b":null}]}`, ok: true},
		{name: "scalar", in: `"x"`, ok: true},
		{name: "syntax", in: `{"a":}`, wantKind: errSyntax},
		{name: "truncated", in: `{"a":[1`, wantKind: errSyntax},
		{name: "empty", in: ``, wantKind: errSyntax},
		{name: "trailing value", in: `{} 1`, wantKind: errSyntax},
		{name: "depth at limit", in: `[[[]]]`, lim: decodeLimits{maxDepth: 3}, ok: true},
		{name: "depth over limit", in: `{"a":[[{}]]}`, lim: decodeLimits{maxDepth: 3}, wantKind: errDepth, wantPtr: "/a/0/0"},
		{name: "nodes at limit", in: `[1,2]`, lim: decodeLimits{maxNodes: 3}, ok: true},
		{name: "nodes over limit", in: `[1,2,3]`, lim: decodeLimits{maxNodes: 3}, wantKind: errNodes, wantPtr: "/2"},
		{name: "duplicate key", in: `{"a":{"b~/":1,"b~/":2}}`, wantKind: errDuplicateKey, wantPtr: "/a/b~0~1"},
		{name: "same key in different objects", in: `{"a":{"k":1},"b":{"k":1}}`, ok: true},
		{name: "number too long", in: `[` + strings.Repeat("1", 101) + `]`, wantKind: errNumber, wantPtr: "/0"},
		{name: "exponent too big", in: `{"n":1e401}`, wantKind: errNumber, wantPtr: "/n"},
		{name: "exponent too small", in: `{"n":1E-401}`, wantKind: errNumber, wantPtr: "/n"},
		{name: "exponent in range", in: `{"n":-1.5e+400}`, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode([]byte(tt.in), tt.lim)
			if tt.ok {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				return
			}
			var de *decodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *decodeError", err)
			}
			if de.kind != tt.wantKind || de.path.pointer() != tt.wantPtr {
				t.Errorf("kind, ptr = %v, %q; want %v, %q", de.kind, de.path.pointer(), tt.wantKind, tt.wantPtr)
			}
		})
	}
}

// Numbers stay json.Number: nothing is rounded through float64.
func TestDecodeKeepsNumbersExact(t *testing.T) {
	v, err := decode([]byte(`{"id":9007199254740993}`), decodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(map[string]any)["id"]; got != json.Number("9007199254740993") {
		t.Errorf("id = %#v", got)
	}
}

func TestFieldPath(t *testing.T) {
	p := fieldPath{{key: "lines"}, {key: "0", index: true}, {key: "a/b~c"}}
	if got := p.pointer(); got != "/lines/0/a~1b~0c" {
		t.Errorf("pointer() = %q", got)
	}
	if got := p.display(); got != "lines[0].a/b~c" {
		t.Errorf("display() = %q", got)
	}
	inst := map[string]any{"0": []any{"x"}}
	if got := pathIn(inst, []string{"0", "0"}).display(); got != "0[0]" {
		t.Errorf("pathIn display = %q, want object key then index", got)
	}
}
