package upstreams

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// idKey names an id exactly as its JSON encoding does, fast path or not.
func TestIDKeyIsTheJSONEncoding(t *testing.T) {
	for _, v := range []any{"gw-1", "", "a b", `q"uote`, `back\slash`, "<tag>&", "é", "\x01", "tab\t", int64(0), int64(-42), int64(9007199254740993), 1.5} {
		id := mcp.NewRequestId(v)
		want, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := idKey(id); got != string(want) {
			t.Errorf("idKey(%#v) = %s, want %s", v, got, want)
		}
	}
}
