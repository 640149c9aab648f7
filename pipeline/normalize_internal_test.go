package pipeline

import (
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/internal/testkit"
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
