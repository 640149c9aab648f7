package dedup

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/canonjson"
)

func TestKeySeparation(t *testing.T) {
	args := []byte(`{"order_id":4821}`)
	type k struct {
		name string
		key  Key
	}
	keys := []k{
		{"alice args", ArgsKey("alice", "orders/refund_order", args)},
		{"bob args", ArgsKey("bob", "orders/refund_order", args)},
		{"alice other tool", ArgsKey("alice", "orders/get_order", args)},
		{"alice other args", ArgsKey("alice", "orders/refund_order", []byte(`{"order_id":4822}`))},
		{"alice no args", ArgsKey("alice", "orders/refund_order", nil)},
		{"alice idem with args as key", IdempotencyKey("alice", "orders/refund_order", string(args))},
		{"alice idem k1", IdempotencyKey("alice", "orders/refund_order", "k1")},
		{"bob idem k1", IdempotencyKey("bob", "orders/refund_order", "k1")},
		{"alice idem k1 other tool", IdempotencyKey("alice", "orders/get_order", "k1")},
		{"alice idem k2", IdempotencyKey("alice", "orders/refund_order", "k2")},
		// field boundaries: the same concatenation split differently
		{"a|bc|x", ArgsKey("a", "bc", []byte("x"))},
		{"ab|c|x", ArgsKey("ab", "c", []byte("x"))},
		{"a|b|cx", ArgsKey("a", "b", []byte("cx"))},
		{"a|bcx|", ArgsKey("a", "bcx", nil)},
		{"|abc|x", ArgsKey("", "abc", []byte("x"))},
		{"idem a|bc|x", IdempotencyKey("a", "bc", "x")},
		{"idem ab|c|x", IdempotencyKey("ab", "c", "x")},
		// a length prefix smuggled into a field
		{"smuggled length", ArgsKey("a\x00\x00\x00\x00\x00\x00\x00\x02bc", "", nil)},
		{"zero", Key{}},
	}
	seen := map[Key]string{}
	for _, x := range keys {
		if other, dup := seen[x.key]; dup {
			t.Errorf("%s and %s have the same key %s", x.name, other, x.key)
		}
		seen[x.key] = x.name
	}
	if ArgsKey("alice", "orders/refund_order", args) != keys[0].key {
		t.Error("ArgsKey is not deterministic")
	}
	if IdempotencyKey("alice", "orders/refund_order", "k1") != keys[6].key {
		t.Error("IdempotencyKey is not deterministic")
	}
	if s := keys[0].key.String(); len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
		t.Errorf("String() = %q, want 64 hex digits", s)
	}
}

// TestKeyCanonicalArgs ties Canonical and ArgsKey: spellings of the same
// arguments give one key.
func TestKeyCanonicalArgs(t *testing.T) {
	key := func(raw string) Key {
		c, err := canonjson.Canonical(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		return ArgsKey("alice", "orders/update_order_status", c)
	}
	a := key(`{"order_id":4821,"status":"shipped"}`)
	if b := key(" {\"status\": \"shipp\\u0065d\", \"order_id\": 4.821e3}\n"); a != b {
		t.Error("reordered, respaced, re-escaped arguments got a different key")
	}
	if b := key(`{"order_id":4821,"status":"pending"}`); a == b {
		t.Error("different arguments got the same key")
	}
}

func TestIdempotencyKeyFrom(t *testing.T) {
	tests := []struct {
		name    string
		meta    *mcp.Meta
		want    string
		ignored bool
	}{
		{"no meta", nil, "", false},
		{"no fields", &mcp.Meta{}, "", false},
		{"progress token only", &mcp.Meta{ProgressToken: "p1"}, "", false},
		{"other field", &mcp.Meta{AdditionalFields: map[string]any{"io.other/key": "x"}}, "", false},
		{"valid", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: "refund-4821-7f3a"}}, "refund-4821-7f3a", false},
		{"at the limit", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: strings.Repeat("k", MaxIdempotencyKeyBytes)}}, strings.Repeat("k", MaxIdempotencyKeyBytes), false},
		{"over the limit", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: strings.Repeat("k", MaxIdempotencyKeyBytes+1)}}, "", true},
		{"multi-byte over the limit", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: strings.Repeat("é", MaxIdempotencyKeyBytes/2+1)}}, "", true},
		{"empty", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: ""}}, "", true},
		{"number", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: 42.0}}, "", true},
		{"null", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: nil}}, "", true},
		{"object", &mcp.Meta{AdditionalFields: map[string]any{MetaKey: map[string]any{}}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IdempotencyKeyFrom(tt.meta)
			if got != tt.want {
				t.Errorf("key = %q, want %q", got, tt.want)
			}
			if ignored := errors.Is(err, ErrIdempotencyKeyIgnored); ignored != tt.ignored || (err != nil && !ignored) {
				t.Errorf("err = %v, want ignored=%v", err, tt.ignored)
			}
		})
	}
}

// TestIdempotencyKeyFromRequest reads the key from a tools/call as it
// arrives on the wire, through mcp-go's decoding.
func TestIdempotencyKeyFromRequest(t *testing.T) {
	raw := `{"name":"orders__refund_order","arguments":{"order_id":4821},
		"_meta":{"progressToken":7,"io.toolgate/idempotency-key":"refund-4821"}}`
	var params mcp.CallToolParams
	if err := json.Unmarshal([]byte(raw), &params); err != nil {
		t.Fatal(err)
	}
	got, err := IdempotencyKeyFrom(params.Meta)
	if err != nil || got != "refund-4821" {
		t.Fatalf("IdempotencyKeyFrom = %q, %v; want refund-4821", got, err)
	}
}
