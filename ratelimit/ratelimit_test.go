package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func take(t *testing.T, m *Memory, bs ...Bucket) Verdict {
	t.Helper()
	v, err := m.Take(context.Background(), bs)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBurstThenRefill(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.now)
	b := Bucket{Key: "p:alice", Scope: "principal alice", PerSecond: 2, Burst: 3}
	for i := range 3 {
		if !take(t, m, b).Allowed {
			t.Fatalf("call %d within the burst refused", i+1)
		}
	}
	v := take(t, m, b)
	if v.Allowed || v.RetryAfter != 500*time.Millisecond || v.Denied.Key != "p:alice" {
		t.Fatalf("past the burst: %+v, want refused with 500ms", v)
	}
	c.advance(499 * time.Millisecond)
	if take(t, m, b).Allowed {
		t.Fatal("allowed before a token was back")
	}
	c.advance(time.Millisecond)
	if !take(t, m, b).Allowed {
		t.Fatal("refused once a token was back")
	}
}

// A call takes from every bucket or from none: a refusal by one bucket
// leaves the others' tokens where they were.
func TestAllOrNone(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.now)
	principal := Bucket{Key: "p:alice", PerSecond: 1, Burst: 5}
	tool := Bucket{Key: "t:x/y", Scope: "tool x/y", PerSecond: 0.1, Burst: 1}
	if !take(t, m, principal, tool).Allowed {
		t.Fatal("first call refused")
	}
	v := take(t, m, principal, tool)
	if v.Allowed || v.Denied.Scope != "tool x/y" || v.RetryAfter != 10*time.Second {
		t.Fatalf("second call: %+v, want refused by the tool for 10s", v)
	}
	for i := range 4 { // the principal still holds 4 tokens: the refusal took none
		if !take(t, m, principal).Allowed {
			t.Fatalf("principal-only call %d refused: the refused call charged it", i+1)
		}
	}
	if take(t, m, principal).Allowed {
		t.Fatal("principal bucket larger than its burst")
	}
}

func TestIdleBucketsAreForgotten(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.now)
	for i := range pruneAbove + 50 {
		take(t, m, Bucket{Key: fmt.Sprintf("p:%d", i), PerSecond: 1, Burst: 1})
	}
	c.advance(2 * time.Second) // every bucket is full again
	take(t, m, Bucket{Key: "p:new", PerSecond: 1, Burst: 1})
	if n := m.Len(); n > 1 {
		t.Errorf("%d buckets kept after they refilled, want 1 (the new one)", n)
	}
}

// A changed configuration resizes the bucket rather than keeping the old size.
func TestResize(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.now)
	small := Bucket{Key: "k", PerSecond: 1, Burst: 1}
	take(t, m, small)
	big := Bucket{Key: "k", PerSecond: 100, Burst: 100}
	if take(t, m, big).Allowed { // resizing grants no tokens for the past
		t.Fatal("a resize refilled the bucket")
	}
	c.advance(10 * time.Millisecond) // 1 token at 100/s (0.01 at the old 1/s)
	if !take(t, m, big).Allowed {
		t.Fatal("the larger rate did not apply")
	}
}

func BenchmarkTake(b *testing.B) {
	m := NewMemory(nil)
	bs := []Bucket{{Key: "p:alice", PerSecond: 1e9, Burst: 1e6}, {Key: "t:x/y", PerSecond: 1e9, Burst: 1e6}}
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := m.Take(context.Background(), bs); !v.Allowed {
			b.Fatal("refused")
		}
	}
}
