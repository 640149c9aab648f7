package dedup

import (
	"context"
	"encoding/json"
	"strconv"
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

// BenchmarkDoUniqueFull is a unique call's way through a full table: the
// gateway's usual case (every call's arguments differ), with the table at
// its bound of finished results, each kept for the window: recorded, the
// oldest evicted, the expired purged.
func BenchmarkDoUniqueFull(b *testing.B) {
	const kept = 100_000
	now := time.Unix(0, 0)
	tb := NewTable[string](kept, func() time.Time { return now })
	fn := func(context.Context) string { return "done" }
	ctx := context.Background()
	keys := make([]Key, 2*kept)
	for i := range keys {
		keys[i] = ArgsKey("alice", "orders/get", []byte(`{"order_id":`+strconv.Itoa(i)+`}`))
	}
	for i := range kept {
		now = now.Add(time.Millisecond)
		tb.Do(ctx, keys[i], time.Minute, fn, nil)
	}
	b.ReportAllocs()
	i := kept
	for b.Loop() {
		now = now.Add(time.Millisecond)
		if _, s, _ := tb.Do(ctx, keys[i%len(keys)], time.Minute, fn, nil); s != Executed {
			b.Fatal(s)
		}
		i++
	}
}
