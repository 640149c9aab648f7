package proxy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// tooDeep is prefix, arrays nested past encoding/json's limit of 10000
// levels, and suffix.
func tooDeep(prefix, suffix string) string {
	return prefix + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + suffix
}

var decodeFastSeeds = []testkit.Seed{
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
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","taſK":{}}}`, false},                                   // encoding/json folds ſ to s: task
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"n\",\"arguments\":\"\xff\u2028\"}}", true}, // raw bytes kept
	{`{"jsonrpc":"2.0","id":"a\\","method":"tools/call"}`, true},
	{"\ufeff{}", false},
	{tooDeep(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":`, `}}`), false},
}

// Where decodeFast takes a body, json.Unmarshal accepts it too and gives the
// same message.
// decodeFastShortcut: where decodeFast takes a body, json.Unmarshal accepts
// it too and gives the same message.
var decodeFastShortcut = testkit.Shortcut[fastMessage]{Decode: decodeFast,
	Check: func(t *testing.T, body []byte, fast fastMessage) {
		var want fastMessage
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("decodeFast took %q, which json.Unmarshal refuses: %v", body, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("decodeFast(%q) = %+v (params %+v), json.Unmarshal %+v (params %+v)", body, fast, fast.Params, want, want.Params)
		}
	}}

func TestDecodeFastAgrees(t *testing.T) { decodeFastShortcut.Table(t, decodeFastSeeds) }

func FuzzDecodeFast(f *testing.F) { decodeFastShortcut.Fuzz(f, decodeFastSeeds) }

func BenchmarkDecodeBody(b *testing.B) {
	body := []byte(decodeFastSeeds[0].In)
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

var resultSeeds = []testkit.Seed{
	{`{"content":[{"type":"text","text":"ping 1"}]}`, true},
	{` {"isError":true,"content":[],"structuredContent":{"a":[1,2]}} `, true},
	{`{"content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":false}`, true},
	{`{"content":[]}`, true},
	{`{}`, true},
	{`{"content":null}`, false},
	{`{"content":[],"_meta":{}}`, false},
	{`{"Content":[]}`, false},
	{`{"content":[],"content":[]}`, false},
	{`{"isError":"yes","content":[]}`, false},
	{`{"isError":null,"content":[]}`, false},
	{`null`, false},
	{``, false},
	{`{"content":[1,]}`, false},
	{`{"content":[{"type":"text","text":"x"}]} {}`, false},
	{`{"structuredContent":null}`, true},
	{"{\"content\":[null , 1,\"\xff\"]}", true},
	{`{"isError":false,"isError":true}`, false},
	{"\v{}", false}, // strictUnmarshal trims it; JSON does not
	{tooDeep(`{"structuredContent":`, `}`), false},
}

// decodeResultShortcut: where decodeResultFast takes a result,
// strictUnmarshal accepts it and gives the same upstreamResult.
var decodeResultShortcut = testkit.Shortcut[upstreamResult]{Decode: decodeResultFast,
	Check: func(t *testing.T, raw []byte, fast upstreamResult) {
		var want upstreamResult
		if err := strictUnmarshal(raw, &want); err != nil {
			t.Fatalf("decodeResultFast took %q, which strictUnmarshal refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("decodeResultFast(%q) = %#v, strictUnmarshal %#v", raw, fast, want)
		}
	}}

func TestDecodeResultFastAgrees(t *testing.T) { decodeResultShortcut.Table(t, resultSeeds) }

func FuzzDecodeResultFast(f *testing.F) { decodeResultShortcut.Fuzz(f, resultSeeds) }

var blockSeeds = []testkit.Seed{
	{`{"type":"text","text":"ping 1"}`, true},
	{`{ "text" : "café ☕ <b>&</b>" , "type" : "text" }`, true},
	{`{"type":"text","text":""}`, true},
	{`{"type":"text","text":"a\nb"}`, false},
	{"{\"type\":\"text\",\"text\":\"\xff\"}", false},
	{"{\"type\":\"text\",\"text\":\"a\x01\"}", false},
	{`{"type":"text"}`, false},
	{`{"type":"image","text":"x"}`, false},
	{`{"type":"text","text":"x","annotations":{"priority":1}}`, false},
	{`{"type":"text","text":"x","text":"y"}`, false},
	{`{"type":"text","text":5}`, false},
	{"{\"type\":\"text\",\"text\":\"\u2028\x7f\"}", true},
	{"{\"type\":\"text\",\"text\":\"\xed\xa0\x80\"}", false}, // a surrogate: json.Unmarshal gives U+FFFD
	{`{"type":"text","Text":"a"}`, false},
	{`{"type":"text","text":"a"}}`, false},
}

// decodeTextBlockShortcut: where decodeTextBlockFast takes a block, the
// slow path gives the same text block.
var decodeTextBlockShortcut = testkit.Shortcut[string]{Decode: decodeTextBlockFast,
	Check: func(t *testing.T, raw []byte, text string) {
		var tb textBlock
		if err := json.Unmarshal(raw, &tb); err != nil || tb.Type != "text" || tb.Text == nil || tb.Annotations != nil {
			t.Fatalf("decodeTextBlockFast took %q; json.Unmarshal: %+v, %v", raw, tb, err)
		}
		if *tb.Text != text {
			t.Fatalf("decodeTextBlockFast(%q) = %q, json.Unmarshal %q", raw, text, *tb.Text)
		}
	}}

func TestDecodeTextBlockFastAgrees(t *testing.T) { decodeTextBlockShortcut.Table(t, blockSeeds) }

func FuzzDecodeTextBlockFast(f *testing.F) { decodeTextBlockShortcut.Fuzz(f, blockSeeds) }
