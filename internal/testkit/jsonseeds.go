package testkit

import "strings"

// The seed tables of the hand-written decoders of package jsonscan, shared
// by its tests and by the tests of the packages that wrap them (the
// pipeline's normalize link, upstreams' line transport).

// TooDeep is prefix, arrays nested past encoding/json's limit of 10000
// levels, and suffix.
func TooDeep(prefix, suffix string) string {
	return prefix + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + suffix
}

// ResultSeeds are tools/call results for jsonscan.ToolResult, and whether
// it takes them (as strict decoding into content, isError and
// structuredContent would decode them).
var ResultSeeds = []Seed{
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
	{"\v{}", false}, // strict decoding trims it; JSON does not
	{TooDeep(`{"structuredContent":`, `}`), false},
	{`{"structuredContent":{"big":1e400}}`, true}, // left raw: its numbers are not decoded
}

// TextBlockSeeds are content blocks for jsonscan.TextBlock.
var TextBlockSeeds = []Seed{
	{`{"type":"text","text":"ping 1"}`, true},
	{`{ "text" : "café ☕ <b>&</b>" , "type" : "text" }`, true},
	{`{"type":"text","text":""}`, true},
	{`{"type":"text","text":"a\nb"}`, true},
	{`{"type":"text","text":"\"q\" \\ \/ \b\f\n\r\t \u0041\u00e9\u2028 \u0000"}`, true},
	{`{"type":"text","text":"pair \ud83d\ude00 end"}`, true},
	{`{"type":"text","text":"lone \ud83d end"}`, false},
	{`{"type":"text","text":"lone \ude00"}`, false},
	{`{"type":"text","text":"high then high \ud83d\ud83d"}`, false},
	{`{"type":"text","text":"bad \x escape"}`, false},
	{`{"type":"text","text":"short \u12"}`, false},
	{`{"type":"text","text":"ends in \"}`, false},
	{`{"text":"\\","type":"text"}`, true},
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

// AnswerSeeds are answer lines for jsonscan.Answer.
var AnswerSeeds = []Seed{
	{`{"jsonrpc":"2.0","id":"gw-1","result":{"content":[{"type":"text","text":"ping"}]}}` + "\n", true},
	{`{"jsonrpc":"2.0","id":17,"result":[]}`, true},
	{`{"jsonrpc":"2.0","id":0,"result":null}` + "\r\n", true},
	{`{"jsonrpc":"2.0","id":"gw-1","result":"}"}`, true},
	{`{"jsonrpc":"2.0","id":"a b","result":{"x":"\u00e9"}}`, true},
	{`{"id":"gw-1","jsonrpc":"2.0","result":{}}`, true},
	{`{"jsonrpc":"2.0","id":1 ,"result":{}}`, true},
	{`{"jsonrpc":"2.0","id":1,"result":{"a":1},"b":2}`, false},
	{`{"jsonrpc":"2.0","id":1, "error":null}`, false},
	{`{"jsonrpc":"2.0","id":01,"result":{}}`, false},
	{`{"jsonrpc":"2.0","id":-1,"result":{}}`, false},
	{`{"jsonrpc":"2.0","id":1.5,"result":{}}`, false},
	{`{"jsonrpc":"2.0","id":"gw\"1","result":{}}`, false},
	{`{"jsonrpc":"2.0","id":"gw-1","result": {}}`, true},
	{`{"jsonrpc":"2.0","id":"gw-1","result":{} }`, true},
	{`{"jsonrpc":"2.0","id":"gw-1","result":{}} ` + "\n", true},
	{` { "jsonrpc" : "2.0" , "id" : 3 , "result" : [ 1 ] } `, true},
	{`{"jsonrpc":"2.0","id":"gw-1","result":{},"error":{}}`, false},
	{`{"jsonrpc":"2.0","id":"gw-1","result":{"a":}}`, false},
	{`{"jsonrpc":"2.0","id":"gw-1","error":{"code":1,"message":"m"}}`, false},
	{`{"result":{},"jsonrpc":"2.0","id":1}`, false},
	{`{"jsonrpc":"2.0","result":{}}`, false},
	{`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, false},
	{`{"jsonrpc":"1.0","id":1,"result":{}}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":{}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":{}`, false},
	{`{"jsonrpc":"2.0","id":1,"Result":{}}`, false},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}", true}, // raw bytes, as json.Unmarshal keeps them in a RawMessage
	{TooDeep(`{"jsonrpc":"2.0","id":1,"result":`, `}`), false},
}
