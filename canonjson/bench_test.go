package canonjson

import (
	"encoding/json"
	"testing"
)

// typicalArgs is a 5-field tools/call argument object.
var typicalArgs = json.RawMessage(`{"status": "shipped", "order_id": 4821, "note": "left at the door \u2014 signed", "amount": 150.50, "tags": ["priority", "gift"]}`)

func BenchmarkCanonical(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalArgs)))
	for b.Loop() {
		if _, err := Canonical(typicalArgs); err != nil {
			b.Fatal(err)
		}
	}
}
