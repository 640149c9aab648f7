package dedup

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/canonjson"
	"github.com/toolgate/toolgate/upstreams"
)

// typicalArgs is a 5-field tools/call argument object.
var typicalArgs = json.RawMessage(`{"status": "shipped", "order_id": 4821, "note": "left at the door \u2014 signed", "amount": 150.50, "tags": ["priority", "gift"]}`)

// BenchmarkKey is what the guard does per call before the table: canonical
// arguments and their key.
func BenchmarkKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c, err := canonjson.Canonical(typicalArgs)
		if err != nil {
			b.Fatal(err)
		}
		_ = ArgsKey("alice", "orders/update_order_status", c)
	}
}

// BenchmarkDoHit is a replay: a finished result within its window.
func BenchmarkDoHit(b *testing.B) {
	tb := NewTable[string](1000, nil)
	key := ArgsKey("alice", "orders/update_order_status", typicalArgs)
	fn := func(context.Context) string { return "done" }
	ctx := context.Background()
	tb.Do(ctx, key, time.Hour, fn, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, s, _ := tb.Do(ctx, key, time.Hour, fn, nil); s != Replayed {
			b.Fatal(s)
		}
	}
}

// BenchmarkDoHitParallel is the same replay from every CPU at once.
func BenchmarkDoHitParallel(b *testing.B) {
	tb := NewTable[string](1000, nil)
	key := ArgsKey("alice", "orders/update_order_status", typicalArgs)
	fn := func(context.Context) string { return "done" }
	tb.Do(context.Background(), key, time.Hour, fn, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tb.Do(context.Background(), key, time.Hour, fn, nil)
		}
	})
}

// BenchmarkKeyFor is BenchmarkKey for a client that declared capabilities.
func BenchmarkKeyFor(b *testing.B) {
	declared := upstreams.DigestCapabilities(mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}, Elicitation: &mcp.ElicitationCapability{}})
	b.ReportAllocs()
	for b.Loop() {
		c, err := canonjson.Canonical(typicalArgs)
		if err != nil {
			b.Fatal(err)
		}
		_ = ArgsKeyFor("alice", "orders/update_order_status", declared, c)
	}
}
