package proxy

import (
	"encoding/json"
	"reflect"
	"testing"
)

var decodeFastSeeds = []struct {
	body string
	fast bool // decodeFast takes it
}{
	{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ping 1"}}}`, true},
	{` { "method" : "tools/call" , "params" : { "arguments" : [1, {"a": "}\"]"}], "name" : "x" } , "id" : "r-1" , "jsonrpc" : "2.0" } ` + "\n", true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":null}}`, true},
	{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`, true},
	{`{"jsonrpc":"2.0","id":-1.5e3,"method":"tools/call","params":{"name":"","arguments":"s"}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"x":"caf\u00e9 ☕"}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{}},"result":{}}`, false},  // another member
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}`, false},                                   // repeated
	{`{"jsonrpc":"2.0","ID":1,"method":"tools/call"}`, false},                                                   // encoding/json folds case
	{`{"jsonrpc":"2.0","id":1,"method":"tools\/call"}`, false},                                                  // an escape
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1}}}`, false}, // _meta
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":}}}`, false},          // invalid
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1}}} x`, false},       // trailing
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1}}`, false},          // cut short
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, false},
	{`{"jsonrpc":"2.0","id":01,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":tru}}`, false},
	{`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`, false},
	{`{}`, true},
	{``, false},
	{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}`, true}, // a strange id: fastCall refuses it later
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}", false},
}

// Where decodeFast takes a body, json.Unmarshal accepts it too and gives the
// same message.
func TestDecodeFastAgrees(t *testing.T) {
	for _, tc := range decodeFastSeeds {
		msg, ok := decodeFast([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("decodeFast(%s) took it: %v, want %v", tc.body, ok, tc.fast)
		}
		checkAgrees(t, []byte(tc.body), msg, ok)
	}
}

func FuzzDecodeFast(f *testing.F) {
	for _, tc := range decodeFastSeeds {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, ok := decodeFast(body)
		checkAgrees(t, body, msg, ok)
	})
}

func checkAgrees(t *testing.T, body []byte, fast fastMessage, ok bool) {
	t.Helper()
	if !ok {
		return
	}
	var want fastMessage
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("decodeFast took %q, which json.Unmarshal refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("decodeFast(%q) = %+v (params %+v), json.Unmarshal %+v (params %+v)", body, fast, fast.Params, want, want.Params)
	}
}

func BenchmarkDecodeBody(b *testing.B) {
	body := []byte(decodeFastSeeds[0].body)
	b.Run("decodeFast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeFast(body); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var msg fastMessage
			if err := json.Unmarshal(body, &msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
