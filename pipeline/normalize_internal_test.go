package pipeline

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/sanitize"
)

// normalize's shortcut decoder and its strict decoding agree on the real
// type: where jsonscan.ToolResult takes a result, strictUnmarshal into
// upstreamResult accepts it and gives the same members (jsonscan's own
// tests check this against a copy of the type; this pins the original).
func TestResultShortcutAgreesWithNormalize(t *testing.T) {
	testkit.Shortcut[upstreamResult]{
		Decode: func(raw []byte) (upstreamResult, bool) {
			var r upstreamResult
			var ok bool
			r.Content, r.StructuredContent, r.IsError, ok = jsonscan.ToolResult(raw)
			return r, ok
		},
		Check: func(t *testing.T, raw []byte, fast upstreamResult) {
			var want upstreamResult
			if err := strictUnmarshal(raw, &want); err != nil {
				t.Fatalf("the shortcut took %q, which normalize's strict decoding refuses: %v", raw, err)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("shortcut %#v, strict %#v for %q", fast, want, raw)
			}
		},
	}.Table(t, testkit.ResultSeeds)
}

// textAnswer's shortcut, quoting clean non-JSON text straight into the
// envelope, gives the envelope of the general path: the text quoted,
// cleaned by sanitize.JSON and wrapped by json.Marshal. The fuzzer's texts
// are cleaned first, as sanitizeContent cleans each block's.
func FuzzTextAnswerAgrees(f *testing.F) {
	for _, s := range []string{"plain", "two\nlines <b>&</b>", "  {\"a\":1} ", "12 apples", "true", "null",
		"\u2028 \x1b[31mred\x1b[0m \u200d", "ends with a joiner 👩\u200d", "\xff", ""} {
		f.Add(s, "second block")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		texts := []string{sanitize.Text(a), sanitize.Text(b)}
		answer, data := textAnswer(texts)
		if data != nil {
			return // the general path's own
		}
		quoted, err := json.Marshal(strings.Join(texts, "\n"))
		if err != nil {
			t.Fatal(err)
		}
		clean, err := sanitize.JSON(quoted)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(envelope.Success(clean))
		if err != nil {
			t.Fatal(err)
		}
		if string(answer.Bytes()) != string(want) {
			t.Fatalf("textAnswer(%q) = %s, the general path %s", texts, answer, want)
		}
	})
}
