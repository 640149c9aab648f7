package toolschema

import (
	"reflect"
	"testing"
)

// usualSeeds are arguments decodeUsual takes (true) or leaves to decode
// (false), for TestDecodeUsualAgrees and FuzzDecodeUsual.
var usualSeeds = []struct {
	args  string
	taken bool
}{
	{`{"message":"ping 1"}`, true},
	{`{}`, true},
	{` { "a" : 1 , "b" : [ true , false , null , -0.5e+3 ] , "c" : { } , "d" : [ ] } `, true},
	{`{"order_id": 9007199254740993, "status": "shipped", "note": "leave at door", "tags": ["a", "b"], "express": true}`, true},
	{`{"x":"caf\u00e9"}`, false},           // an escape: decode's
	{"{\"x\":\"café ☕ \u2028\"}", true},    // UTF-8 as it is
	{"{\"x\":\"\xff\"}", false},            // not UTF-8: decode replaces it
	{`{"a":1,"a":2}`, false},               // repeated: decode refuses it
	{`{"amount":50,"Amount":5000}`, false}, // equal but for case: decode refuses it
	{`{"k":1,"K":2}`, false},               //
	{`{"caf\u00e9":1}`, false},             // an escaped key
	{`{"é":1}`, false},                     // a key that is not ASCII
	{`{"n":1e999}`, false},                 // out of range: decode refuses it
	{`{"n":01}`, false},                    // not JSON
	{`{"n":1.}`, false},                    //
	{`{"n":-}`, false},                     //
	{`{"n":tru}`, false},                   //
	{`{"n":1}x`, false},                    //
	{`{"n":1,}`, false},                    //
	{`{"n":[1,]}`, false},                  //
	{`{"n":{"m":1}`, false},                //
	{`[1]`, false},                         // not an object
	{`"x"`, false},                         //
	{`{"n":123456789012345678901234567890}`, true},
	{`{"n":{"m":{"o":[[["deep"]]]}}}`, true},
}

// TestDecodeUsualAgrees: where decodeUsual takes arguments, decode gives
// the same tree.
func TestDecodeUsualAgrees(t *testing.T) {
	for _, s := range usualSeeds {
		got, ok := decodeUsual([]byte(s.args))
		if ok != s.taken {
			t.Errorf("%s: taken %t, want %t", s.args, ok, s.taken)
		}
		if ok {
			checkUsual(t, []byte(s.args), got)
		}
	}
}

func checkUsual(t *testing.T, args []byte, got map[string]any) {
	t.Helper()
	want, err := decode(args, decodeLimits{maxDepth: maxInstanceDepth, foldKeys: true})
	if err != nil {
		t.Fatalf("%s: decodeUsual took it, decode refuses it: %v", args, err)
	}
	if !reflect.DeepEqual(any(got), want) {
		t.Fatalf("%s: decodeUsual %#v, decode %#v", args, got, want)
	}
}

// TestDecodeUsualDepth: nesting past maxInstanceDepth is decode's to refuse.
func TestDecodeUsualDepth(t *testing.T) {
	nest := func(n int) []byte {
		b := []byte(`{"a":`)
		for range n - 1 { // the object is the first level
			b = append(b, '[')
		}
		b = append(b, '1')
		for range n - 1 {
			b = append(b, ']')
		}
		return append(b, '}')
	}
	if _, ok := decodeUsual(nest(maxInstanceDepth)); !ok {
		t.Fatalf("%d levels: not taken", maxInstanceDepth)
	}
	if _, ok := decodeUsual(nest(maxInstanceDepth + 1)); ok {
		t.Fatalf("%d levels: taken", maxInstanceDepth+1)
	}
	if _, err := decodeArguments(nest(maxInstanceDepth + 1)); err == nil {
		t.Fatalf("%d levels: accepted", maxInstanceDepth+1)
	}
}

func FuzzDecodeUsual(f *testing.F) {
	for _, s := range usualSeeds {
		f.Add([]byte(s.args))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		if got, ok := decodeUsual(args); ok {
			checkUsual(t, args, got)
		}
	})
}
