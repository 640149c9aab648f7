package canonjson

import (
	"errors"
	"strings"
	"testing"
)

// The cases below came from the pins package's own canonicaliser, merged
// into this one. Where the two disagreed (number formatting at the edges,
// error wording), the expectations are this package's; see the comments.

func TestPinsCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null],"c":{"z":"","y":{}}}`, `{"a":[true,false,null],"b":1,"c":{"y":{},"z":""}}`},
		{`"a\/b\"c\\d\n\t\u0001\u00e9\ud83d\ude00<>&"`, "\"a/b\\\"c\\\\d\\n\\t\\u0001é😀<>&\""},
		{"\"\u2028\u200b\"", "\"\u2028\u200b\""},
		{`{"é":1,"e":2,"E":3}`, `{"E":3,"e":2,"é":1}`},
		{` [ ] `, `[]`},
	}
	for _, tt := range tests {
		got, err := Canonical([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestPinsCanonicalNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.000", "0"}, {"0e10", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1e0", "1"}, {"10e-1", "1"}, {"0.1e1", "1"},
		{"100", "100"}, {"1e2", "100"}, {"1E+2", "100"},
		{"-12.50", "-12.5"}, {"0.001", "0.001"},
		// pins wrote 1e-7 as 0.0000001 (plain down to the 7th decimal place);
		// plain decimals stop at the 6th place here, as in JavaScript.
		{"1e-7", "1e-7"},
		{"1e-8", "1e-8"},
		// pins wrote 0.0000012 plain; its first significant digit is at the
		// 6th place, so it is plain here too.
		{"0.0000012", "0.0000012"},
		{"123456789012345678901", "123456789012345678901"},
		{"1e20", "100000000000000000000"},
		// pins switched to the exponent form once an integer had more than
		// 21 digits (1e21 -> "1e21"); here an integer is written out while it
		// has at most 21 trailing zeros, whatever its length.
		{"1e21", "1000000000000000000000"},
		{"12345678901234567890123", "12345678901234567890123"},
		{"9007199254740993", "9007199254740993"}, // 2^53+1: float64 would round it
		{"1.0000000000000000001", "1.0000000000000000001"},
		{"1e400", "1e400"}, {"-2.5e-400", "-2.5e-400"},
		{"1e99999999999999999999", "1e99999999999999999999"},
	}
	for _, tt := range tests {
		got, err := Canonical([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// A value parsers could read in two ways has no canonical form.
func TestPinsCanonicalRejects(t *testing.T) {
	tests := []struct {
		name, in string
		is       error
		want     string
	}{
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey, `duplicate object key "a"`},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", ErrInvalidJSON, "invalid UTF-8"},
		{"lone high surrogate", `"\ud800"`, ErrInvalidJSON, "lone UTF-16 surrogate"},
		{"lone low surrogate", `"\udc00x"`, ErrInvalidJSON, "lone UTF-16 surrogate"},
		{"trailing data", `{} {}`, ErrInvalidJSON, "after the value"},
		{"leading zero", `[01]`, ErrInvalidJSON, "leading zero"},
		{"bare dot", `[1.]`, ErrInvalidJSON, "expected a digit after the decimal point"},
		{"control character", "\"a\x01\"", ErrInvalidJSON, "control character"},
		{"unterminated", `{"a":`, ErrInvalidJSON, "end of input"},
		{"too deep", strings.Repeat("[", 300) + strings.Repeat("]", 300), ErrInvalidJSON, "nested deeper than 256"},
		{"bad escape", `"\x"`, ErrInvalidJSON, `invalid escape`},
		{"single quotes", `{'a':1}`, ErrInvalidJSON, "expected a string for an object key"},
		{"empty", ``, ErrInvalidJSON, "end of input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Canonical([]byte(tt.in))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %v containing %q", err, tt.is, tt.want)
			}
		})
	}
}

// AppendString writes strings exactly as Canonical does.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c\b\f\n\r\t\x01\x1f\x7f", "é😀\u2028<>&"} {
		want, err := Canonical(AppendString(nil, s))
		if err != nil || string(want) != string(AppendString(nil, s)) {
			t.Errorf("AppendString(%q) = %s is not canonical (%s, %v)", s, AppendString(nil, s), want, err)
		}
		if got := AppendString(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("AppendString([]byte %q) = %s, want %s", s, got, want)
		}
	}
}
