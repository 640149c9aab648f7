package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// toolResult is what ToolResult stands in for: the pipeline's strict
// decoding of an upstream's result (surrounding whitespace trimmed, empty
// and null refused).
type toolResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
}

func strictUnmarshal(raw []byte, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return errors.New("empty result")
	}
	return json.Unmarshal(trimmed, v)
}

// toolResultShortcut: where ToolResult takes a result, strict decoding
// accepts it and gives the same members.
var toolResultShortcut = testkit.Shortcut[toolResult]{
	Decode: func(raw []byte) (toolResult, bool) {
		content, structured, isError, ok := ToolResult(raw)
		return toolResult{content, structured, isError}, ok
	},
	Check: func(t *testing.T, raw []byte, fast toolResult) {
		var want toolResult
		if err := strictUnmarshal(raw, &want); err != nil {
			t.Fatalf("ToolResult took %q, which strict decoding refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("ToolResult(%q) = %#v, strict decoding %#v", raw, fast, want)
		}
	}}

func TestToolResultAgrees(t *testing.T) { toolResultShortcut.Table(t, testkit.ResultSeeds) }

func FuzzToolResult(f *testing.F) { toolResultShortcut.Fuzz(f, testkit.ResultSeeds) }

// textBlock is the slow path's decoding of a text block.
type textBlock struct {
	Type        string  `json:"type"`
	Text        *string `json:"text"`
	Annotations any     `json:"annotations"`
}

// textBlockShortcut: where TextBlock takes a block, json.Unmarshal gives
// the same text block, without annotations.
var textBlockShortcut = testkit.Shortcut[string]{Decode: TextBlock,
	Check: func(t *testing.T, raw []byte, text string) {
		var tb textBlock
		if err := json.Unmarshal(raw, &tb); err != nil || tb.Type != "text" || tb.Text == nil || tb.Annotations != nil {
			t.Fatalf("TextBlock took %q; json.Unmarshal: %+v, %v", raw, tb, err)
		}
		if *tb.Text != text {
			t.Fatalf("TextBlock(%q) = %q, json.Unmarshal %q", raw, text, *tb.Text)
		}
	}}

func TestTextBlockAgrees(t *testing.T) { textBlockShortcut.Table(t, testkit.TextBlockSeeds) }

func FuzzTextBlock(f *testing.F) { textBlockShortcut.Fuzz(f, testkit.TextBlockSeeds) }

// answer is the line transport's decoding of a line, as far as an answer
// goes.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
}

// answerShortcut: where Answer takes a line, json.Unmarshal gives the same
// id and result, and the id is one PlainIDLen accepts.
var answerShortcut = testkit.Shortcut[answer]{
	Decode: func(line []byte) (answer, bool) {
		id, result, ok := Answer(line)
		return answer{id, result}, ok
	},
	Check: func(t *testing.T, line []byte, fast answer) {
		var want answer
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("Answer took %q, which json.Unmarshal refuses: %v", line, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("Answer(%q) = %s %s, json.Unmarshal %s %s", line, fast.ID, fast.Result, want.ID, want.Result)
		}
		if PlainIDLen(fast.ID) != len(fast.ID) {
			t.Fatalf("Answer(%q) took the id %s", line, fast.ID)
		}
	}}

func TestAnswerAgrees(t *testing.T) { answerShortcut.Table(t, testkit.AnswerSeeds) }

func FuzzAnswer(f *testing.F) { answerShortcut.Fuzz(f, testkit.AnswerSeeds) }

// Value flags the numbers json.Unmarshal refuses into an interface (a
// float64 holds none past 1.8e308), and no others.
func TestValueBigNumber(t *testing.T) {
	long := string(bytes.Repeat([]byte("9"), 309))
	for v, big := range map[string]bool{
		`1`: false, `-12.5`: false, `[1,2,{"a":3}]`: false, `"1e400"`: false, `true`: false, `[false,true]`: false,
		`{"e":"E","ee":1}`: false, `123456789012345678901234567890`: false, `[` + long[:308] + `]`: false,
		`[1E3]`: false, `{"a":[0.5e-3]}`: false, `1e308`: false, `1e-400`: false, `[1e3 , 2E+5]`: false,
		`1e400`: true, `[1,-2e308]`: true, long: true, `[` + long + `,1]`: true, `{"a":` + long + `}`: true, `{"a": 1E309 }`: true,
	} {
		c := NewCursor([]byte(v))
		if got := c.Value(); string(got) != v {
			t.Errorf("Value(%s) = %s", v, got)
		}
		if c.BigNumber() != big {
			t.Errorf("Value(%.40s…): BigNumber %v, want %v", v, c.BigNumber(), big)
		}
	}
}

// Value flags a number exactly when json.Unmarshal into an interface
// refuses it.
func FuzzValueBigNumber(f *testing.F) {
	for _, s := range []string{`1`, `[1e5]`, `{"a":-0.5}`, `123456789012345678901234567890`, `[1e400]`, `{"a":[2E308,true]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c := NewCursor(in)
		v := c.Value()
		if v == nil || !json.Valid(v) {
			return
		}
		var x any
		if err := json.Unmarshal(v, &x); (err != nil) != c.BigNumber() {
			t.Fatalf("Value(%q): BigNumber %v, json.Unmarshal: %v", v, c.BigNumber(), err)
		}
	})
}

// BenchmarkDecoders is each decoder on the first (usual) seed of its table.
func BenchmarkDecoders(b *testing.B) {
	answer, result, block := []byte(testkit.AnswerSeeds[0].In), []byte(testkit.ResultSeeds[0].In), []byte(testkit.TextBlockSeeds[0].In)
	for name, fn := range map[string]func() bool{
		"Answer": func() bool {
			_, _, ok := Answer(answer)
			return ok
		},
		"ToolResult": func() bool {
			_, _, _, ok := ToolResult(result)
			return ok
		},
		"TextBlock": func() bool {
			_, ok := TextBlock(block)
			return ok
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !fn() {
					b.Fatal("refused")
				}
			}
		})
	}
}
