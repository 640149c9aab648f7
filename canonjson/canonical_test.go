package canonjson

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// objects and arrays
		{"key order", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"whitespace", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } ", `{"a":[1,2],"b":{}}`},
		{"nested key order", `{"z":{"y":1,"x":{"b":true,"a":null}},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":{"a":null,"b":true},"y":1}}`},
		{"arrays keep order", `[3,1,2,"b","a"]`, `[3,1,2,"b","a"]`},
		{"empty containers", `{"a":[],"b":{},"c":[{}]}`, `{"a":[],"b":{},"c":[{}]}`},
		{"keys sorted by code point", `{"é":1,"z":2,"Z":3,"":4,"aa":5,"a":6}`, `{"":4,"Z":3,"a":6,"aa":5,"z":2,"é":1}`},
		{"keys sorted by decoded value", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"top-level scalar", ` 1.0 `, `1`},
		{"top-level string", `"x"`, `"x"`},
		// strings
		{"unicode escape decoded", `"\u0041\u00e9\u4e2d"`, `"Aé中"`},
		{"escaped solidus", `"a\/b"`, `"a/b"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"upper-case hex", `"\u00E9"`, `"é"`},
		{"short escapes kept", `"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
		{"control escape normalised", `"\u000a\u0009\u001F\u0000"`, `"\n\t\u001f\u0000"`},
		{"DEL and U+2028 literal", `"\u007f\u2028"`, "\"\x7f\u2028\""},
		{"HTML characters literal", `"\u003c&>"`, `"<&>"`},
		{"escaped key", `{"a\u0022b":1}`, `{"a\"b":1}`},
		// numbers
		{"integer", `42`, `42`},
		{"1.0", `1.0`, `1`},
		{"1e0", `1e0`, `1`},
		{"10e-1", `10e-1`, `1`},
		{"0.1e1", `0.1e1`, `1`},
		{"100E-2", `100E-2`, `1`},
		{"exponent plus", `1E+2`, `100`},
		{"negative", `-1.50`, `-1.5`},
		{"negative zero", `-0`, `0`},
		{"zero spellings", `[0,0.0,-0.000,0e10,0E-10]`, `[0,0,0,0,0]`},
		{"2^53+1 exact", `9007199254740993`, `9007199254740993`},
		{"2^53+1 with fraction zeros", `9007199254740993.000`, `9007199254740993`},
		{"big integer", `123456789012345678901234567890`, `123456789012345678901234567890`},
		{"big integer exponent spelling", `1.23456789012345678901234567890e29`, `123456789012345678901234567890`},
		{"fraction", `0.1`, `0.1`},
		{"long fraction exact", `0.30000000000000000000000000001`, `0.30000000000000000000000000001`},
		{"fraction from exponent", `15e-1`, `1.5`},
		{"small plain", `0.000001`, `0.000001`},
		{"small exponent", `0.0000001`, `1e-7`},
		{"small exponent digits", `-0.000000123`, `-1.23e-7`},
		{"1e21 written out", `1e21`, `1000000000000000000000`},
		{"1e22 exponent form", `1e22`, `1e22`},
		{"mantissa exponent form", `125e20`, `12500000000000000000000`},
		{"mantissa exponent form large", `125e22`, `1.25e24`},
		{"huge exponent", `1e99999999999999999999`, `1e99999999999999999999`},
		{"huge exponent normalised", `10.0e99999999999999999999`, `1e100000000000000000000`},
		{"huge negative exponent", `-0.12e-99999999999999999999`, `-1.2e-100000000000000000000`},
		{"exponent leading zeros", `1e0000000000000000000002`, `100`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonical(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("canonical form %s is not valid JSON", got)
			}
			again, err := Canonical(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: Canonical(%s) = %s, %v", got, again, err)
			}
		})
	}
}

// TestCanonicalEquivalence checks that spellings of one value are equal and
// different values are not.
func TestCanonicalEquivalence(t *testing.T) {
	groups := [][]string{
		{`{"order_id":4821,"status":"shipped"}`, `{ "status" : "shipped", "order_id" : 4821.0 }`, "{\"status\":\"ship\\u0070ed\",\n\"order_id\":4.821e3}"},
		{`1`, `1.0`, `1e0`, `1E0`, `10e-1`, `0.1e1`, `1.000000000000000000000000000`},
		{`9007199254740992`},
		{`9007199254740993`},
		{`1.0000000000000000000000000001`},
		{`"a"`, `"\u0061"`},
		{`"A"`},
		{`[1,2]`, `[ 1 , 2.0 ]`},
		{`[2,1]`},
		{`{"a":{"b":1,"c":2}}`, `{"a":{"c":2,"b":1}}`},
		{`{"a":{"b":1,"c":3}}`},
		{`"1"`},
		{`null`},
		{`{}`},
		{`[]`},
		{`""`},
		{`"\ufffd"`},
	}
	seen := map[string]string{}
	for _, g := range groups {
		first, err := Canonical(json.RawMessage(g[0]))
		if err != nil {
			t.Fatalf("Canonical(%s): %v", g[0], err)
		}
		for _, in := range g[1:] {
			got, err := Canonical(json.RawMessage(in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", in, err)
			}
			if string(got) != string(first) {
				t.Errorf("Canonical(%s) = %s, want %s (as for %s)", in, got, first, g[0])
			}
		}
		if other, dup := seen[string(first)]; dup {
			t.Errorf("%s and %s are different values but both canonicalise to %s", other, g[0], first)
		}
		seen[string(first)] = g[0]
	}
}

func TestCanonicalErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, ErrInvalidJSON},
		{"whitespace only", "  \n", ErrInvalidJSON},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate key same value", `{"a":1,"b":0,"a":1}`, ErrDuplicateKey},
		{"duplicate key by escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"nested duplicate key", `{"x":[{"k":1,"k":1}]}`, ErrDuplicateKey},
		{"trailing garbage", `{"a":1} x`, ErrInvalidJSON},
		{"two values", `1 2`, ErrInvalidJSON},
		{"trailing comma object", `{"a":1,}`, ErrInvalidJSON},
		{"trailing comma array", `[1,]`, ErrInvalidJSON},
		{"missing colon", `{"a" 1}`, ErrInvalidJSON},
		{"missing value", `{"a":}`, ErrInvalidJSON},
		{"unquoted key", `{a:1}`, ErrInvalidJSON},
		{"single quotes", `{'a':1}`, ErrInvalidJSON},
		{"unterminated object", `{"a":1`, ErrInvalidJSON},
		{"unterminated array", `[1`, ErrInvalidJSON},
		{"unterminated string", `"abc`, ErrInvalidJSON},
		{"bad literal", `tru`, ErrInvalidJSON},
		{"capital literal", `True`, ErrInvalidJSON},
		{"leading zero", `01`, ErrInvalidJSON},
		{"negative leading zero", `-01`, ErrInvalidJSON},
		{"bare minus", `-`, ErrInvalidJSON},
		{"plus sign", `+1`, ErrInvalidJSON},
		{"leading point", `.5`, ErrInvalidJSON},
		{"trailing point", `1.`, ErrInvalidJSON},
		{"empty exponent", `1e`, ErrInvalidJSON},
		{"signed empty exponent", `1e+`, ErrInvalidJSON},
		{"NaN", `NaN`, ErrInvalidJSON},
		{"Infinity", `-Infinity`, ErrInvalidJSON},
		{"hex", `0x10`, ErrInvalidJSON},
		{"invalid escape", `"\x41"`, ErrInvalidJSON},
		{"short unicode escape", `"\u12"`, ErrInvalidJSON},
		{"lone high surrogate", `"\ud800"`, ErrInvalidJSON},
		{"lone low surrogate", `"\udc00"`, ErrInvalidJSON},
		{"high surrogate then letter", `"\ud800x"`, ErrInvalidJSON},
		{"two high surrogates", `"\ud800\ud800"`, ErrInvalidJSON},
		{"raw control character", "\"a\nb\"", ErrInvalidJSON},
		{"invalid UTF-8", "\"\xff\"", ErrInvalidJSON},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", ErrInvalidJSON},
		{"overlong UTF-8", "\"\xc0\xaf\"", ErrInvalidJSON},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", ErrInvalidJSON},
		{"byte order mark", "\ufeff{}", ErrInvalidJSON},
		{"form feed as space", "\f{}", ErrInvalidJSON},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical(json.RawMessage(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonical(%q) = %s, %v; want an error wrapping %v", tt.in, got, err, tt.want)
			}
			if got != nil {
				t.Errorf("Canonical(%q) returned %q with its error", tt.in, got)
			}
		})
	}
}

func TestCanonicalDepthLimit(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, maxDepth/2) + strings.Repeat(`]}`, maxDepth/2)
	got, err := Canonical(json.RawMessage(deep))
	if err != nil {
		t.Fatalf("nesting of exactly %d: %v", maxDepth, err)
	}
	if string(got) != deep {
		t.Errorf("deep value changed")
	}
}

// FuzzCanonical checks the properties the table relies on, against
// encoding/json: accepted input is valid JSON, the output is valid JSON with
// the same structure (up to number spelling), and canonicalisation is
// idempotent.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,2e3,"x\u00e9"]}`, `[{"a":1,"a":2}]`, `"\ud83d\ude00"`, `-0.0e-5`, `1e99999999999999999999`,
		`{"":{"":[]}}`, `[true,false,null]`, `"\ud800"`, "\"\xff\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(out) {
			t.Fatalf("Canonical(%q) = %q, not valid JSON", in, out)
		}
		again, err := Canonical(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		var a, b any
		dec := func(s []byte, v *any) {
			d := json.NewDecoder(strings.NewReader(string(s)))
			d.UseNumber()
			if err := d.Decode(v); err != nil {
				t.Fatalf("decode %q: %v", s, err)
			}
		}
		dec(in, &a)
		dec(out, &b)
		if !sameShape(a, b) {
			t.Fatalf("Canonical(%q) = %q changes the value", in, out)
		}
	})
}

// sameShape compares decoded values, numbers by their canonical form.
func sameShape(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if !sameShape(v, b[k]) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameShape(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, okA := smallRat(string(a))
		rb, okB := smallRat(string(b))
		if okA && okB {
			return ra.Cmp(rb) == 0 // exact values agree
		}
		ca, err1 := Canonical(json.RawMessage(a))
		cb, err2 := Canonical(json.RawMessage(b))
		return err1 == nil && err2 == nil && string(ca) == string(cb)
	default:
		return a == b
	}
}

// smallRat parses a JSON number whose exponent is small enough for big.Rat
// to hold exactly without a huge allocation.
func smallRat(s string) (*big.Rat, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(s[i+1:], "+-0")) > 4 {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}
