package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// checkInvariants holds the table's bookkeeping to what its entries are:
// the age list links every finished entry in order, the whole list exactly
// those not stripped, the expiry queues and the map the same set (each
// queue of one window, in expiry order), and bytes
// their sum, never over the bound.
func (t *Table[R]) checkInvariants(tb testing.TB) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var whole []*entry[R]
	var prev *entry[R]
	n, bytes := 0, int64(0)
	for e := t.age.oldest; e != nil; prev, e = e, e.age.next {
		switch {
		case e.age.prev != prev:
			tb.Fatalf("age list: a broken back link at %d", n)
		case !e.kept || t.entries[e.key] != e:
			tb.Fatalf("age list: entry %d is not a kept entry of the map", n)
		case e.queue == nil || !t.queued(e):
			tb.Fatalf("entry %d is not in an expiry queue", n)
		case e.size != t.sizeOf(e.result):
			tb.Fatalf("entry %d: size %d, sizeOf %d", n, e.size, t.sizeOf(e.result))
		case e.stripped && e.whole != (link[R]{}):
			tb.Fatalf("entry %d: stripped and still in the whole list", n)
		}
		if !e.stripped {
			whole = append(whole, e)
		}
		n, bytes = n+1, bytes+e.size
	}
	if queued := t.checkQueues(tb); prev != t.age.newest || n != t.finished || n != queued || n != len(t.entries)-t.inFlightLocked() {
		tb.Fatalf("%d entries in the age list; finished %d, queued %d, map %d", n, t.finished, queued, len(t.entries))
	}
	if bytes != t.bytes || t.bytes > t.maxBytes {
		tb.Fatalf("bytes %d, their sum %d, the bound %d", t.bytes, bytes, t.maxBytes)
	}
	i := 0
	prev = nil
	for e := t.whole.oldest; e != nil; prev, e = e, e.whole.next {
		if i >= len(whole) || whole[i] != e || e.whole.prev != prev {
			tb.Fatalf("the whole list is not the unstripped entries in age order at %d", i)
		}
		i++
	}
	if i != len(whole) || t.whole.newest != prev {
		tb.Fatalf("the whole list has %d entries, want %d", i, len(whole))
	}
}

// checkQueues checks each expiry queue's links and order and returns how
// many entries they hold.
func (t *Table[R]) checkQueues(tb testing.TB) int {
	n := 0
	windows := map[time.Duration]bool{}
	for qi, q := range t.expiry {
		if windows[q.window] {
			tb.Fatalf("expiry queue %d: a second queue for window %s", qi, q.window)
		}
		windows[q.window] = true
		var prev *entry[R]
		for e := q.entries.oldest; e != nil; prev, e = e, e.expiry.next {
			switch {
			case e.expiry.prev != prev || e.queue != q:
				tb.Fatalf("expiry queue %d: a broken link at entry %d", qi, n)
			case !e.kept || t.entries[e.key] != e:
				tb.Fatalf("expiry queue %d: entry %d is not a kept entry of the map", qi, n)
			case prev != nil && e.expires.Before(prev.expires):
				tb.Fatalf("expiry queue %d: entry %d expires before the one queued before it", qi, n)
			case e.expires.Sub(e.finishedAt) != q.window:
				tb.Fatalf("expiry queue %d (window %s): entry %d of window %s", qi, q.window, n, e.expires.Sub(e.finishedAt))
			}
			n++
		}
		if q.entries.newest != prev {
			tb.Fatalf("expiry queue %d: its newest is not its last", qi)
		}
	}
	return n
}

// queued reports whether e is linked in its queue.
func (t *Table[R]) queued(e *entry[R]) bool {
	for x := e.queue.entries.oldest; x != nil; x = x.expiry.next {
		if x == e {
			return true
		}
	}
	return false
}

func (t *Table[R]) inFlightLocked() int {
	n := 0
	for _, e := range t.entries {
		if !e.kept {
			n++
		}
	}
	return n
}

// Random calls, sizes, windows, keyed results and clock steps against the
// invariants after every step, and against a model of what ran: with room
// for every key and its stand-in (neither count nor bytes can force a
// drop), no key runs twice within its window.
func TestTableAgainstAModel(t *testing.T) {
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 1))
		tb, clk, _ := newTestTable(1 + rng.IntN(80))
		tb.onJoin = nil
		maxBytes := int64(20 + rng.IntN(200))
		tb.LimitBytes(maxBytes, func(r string) int64 { return int64(len(r)) },
			func(r string) bool { return strings.HasPrefix(r, "K") }, func(r string) string { return r[:1] })
		roomy := tb.max >= 40 && maxBytes >= 40 // 20 keys, 1-byte stand-ins: nothing is ever dropped
		ranAt := map[int]time.Time{}
		for step := range 2000 {
			if rng.IntN(10) == 0 {
				clk.Advance(time.Duration(rng.IntN(30)) * time.Second)
				tb.checkInvariants(t)
				continue
			}
			k := rng.IntN(20)
			window := 60 * time.Second
			if k%3 == 0 {
				window = 90 * time.Second // a key's window is the same on every call
			}
			prefix := "x"
			if k%4 == 0 {
				prefix = "K"
			}
			result := prefix + strings.Repeat("v", rng.IntN(int(maxBytes/2)))
			keep := rng.IntN(8) != 0
			ran := false
			if _, _, err := tb.Do(t.Context(), ArgsKey("p", "t", fmt.Appendf(nil, "%d", k)), window,
				func(context.Context) string { ran = true; return result }, func(string) bool { return keep }); err != nil {
				t.Fatal(err)
			}
			now := clk.Now()
			if at, ok := ranAt[k]; ok && ran && roomy && now.Sub(at) < window {
				t.Fatalf("seed %d step %d: key %d ran again %v after it ran (window %v)", seed, step, k, now.Sub(at), window)
			}
			switch {
			case ran && keep:
				ranAt[k] = now
			case ran:
				delete(ranAt, k)
			}
			tb.checkInvariants(t)
		}
	}
}
