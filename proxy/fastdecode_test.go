package proxy

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
)

var decodeFastSeeds = []testkit.Seed{
	{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ping 1"}}}`, true},
	{` { "method" : "tools/call" , "params" : { "arguments" : [1, {"a": "}\"]"}], "name" : "x" } , "id" : "r-1" , "jsonrpc" : "2.0" } ` + "\n", true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":null}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"x":"caf\u00e9 ☕"}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"tracestate":"a=1","io.toolgate/idempotency-key":"k"},"name":"n"}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{}}}`, true},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"n\",\"arguments\":\"\xff\u2028\"}}", true}, // raw bytes kept
	{`{"jsonrpc":"2.0","id":"a-1 b","method":"tools/call","params":{"name":"n","arguments":123456789012345678901234567890}}`, true},
	{`{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"n","arguments":[-1.5,0,true,false,null,"e"]}}`, true},

	{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`, false}, // no id to answer, no name
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, false},    // no name
	{`{"jsonrpc":"2.0","id":-1.5e3,"method":"tools/call","params":{"name":"","arguments":"s"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{}},"result":{}}`, false}, // another member
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}`, false},                                  // repeated
	{`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"n"}}`, false},                            // encoding/json folds case
	{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"n"}}`, false},                           // an escape
	{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"n"}}`, false},                            // another method
	{`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"n"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":"p-1 <&>","traceparent":"t"}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":-123456789012345}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":0}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":""}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":null}}}`, false}, // no token for mcp-go
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1.5}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1e3}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":-0}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":01}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1234567890123456}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":"a\u0041"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":"café"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":{}}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":true}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":1,"progressToken":2}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"ProgressToken":1}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"other":"x"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"traceparent":1}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"traceparent":"a","traceparent":"b"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":null}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","task":{}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1e400}}}`, false}, // mcp-go cannot decode it
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":}}}`, false},      // invalid
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1}}} x`, false},   // trailing
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1}}`, false},      // cut short
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, false},
	{`{"jsonrpc":"2.0","id":01,"method":"tools/call","params":{"name":"n"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":tru}}`, false},
	{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"}}]`, false},
	{`{}`, false},
	{``, false},
	{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"n"}}`, false},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}", false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","taſK":{}}}`, false}, // encoding/json folds ſ to s: task
	{`{"jsonrpc":"2.0","id":"a\\","method":"tools/call","params":{"name":"n"}}`, false},
	{"\ufeff{}", false},
	{testkit.TooDeep(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":`, `}}`), false},
}

// decodeFastShortcut: where decodeFast takes a body, mcp-go decodes it
// into the same tools/call (CallToolRequest, and the id HandleMessage
// writes back), and the body holds no member the allow-list does not.
var decodeFastShortcut = testkit.Shortcut[fastRequest]{Decode: decodeFast,
	Check: func(t *testing.T, body []byte, fast fastRequest) {
		var base struct {
			JSONRPC string `json:"jsonrpc"`
			ID      any    `json:"id"`
		}
		var req mcp.CallToolRequest
		if err := json.Unmarshal(body, &base); err != nil {
			t.Fatalf("decodeFast took %q, which mcp-go refuses: %v", body, err)
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("decodeFast took %q, which mcp-go refuses as a tools/call: %v", body, err)
		}
		if id, err := json.Marshal(mcp.NewRequestId(base.ID)); err != nil || string(id) != string(fast.ID) {
			t.Fatalf("decodeFast(%q): id %s, which mcp-go writes back as %s (%v)", body, fast.ID, id, err)
		}
		want := req.Params
		got := fast.params()
		if base.JSONRPC != mcp.JSONRPC_VERSION || req.Method != string(mcp.MethodToolsCall) || want.Task != nil ||
			!reflect.DeepEqual(want.MultiRoundTripParams, mcp.MultiRoundTripParams{}) ||
			got.Name != want.Name || string(got.RawArguments) != string(want.RawArguments) || !reflect.DeepEqual(got.Meta, want.Meta) {
			t.Fatalf("decodeFast(%q) = %+v (_meta %+v), mcp-go %+v (_meta %+v)", body, got, got.Meta, want, want.Meta)
		}
		var members map[string]any
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatal(err)
		}
		only(t, body, members, requestMembers[:])
		params, _ := members["params"].(map[string]any)
		only(t, body, params, paramsMembers[:])
		meta, _ := params["_meta"].(map[string]any)
		only(t, body, meta, metaMembers[:])
	}}

// only fails unless every member of m is allowed.
func only(t *testing.T, body []byte, m map[string]any, allowed []string) {
	t.Helper()
	for k := range m {
		if !slices.Contains(allowed, k) {
			t.Fatalf("decodeFast took %q, with the member %q", body, k)
		}
	}
}

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
			var req mcp.CallToolRequest
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
