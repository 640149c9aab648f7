// Package flights groups writes that come while another is being made into
// one: group commit for the gateway's per-call write(2)s (the audit trail's
// records).
//
// Each call first boards the flight that is boarding, or starts one. The
// caller that started a flight departs it: it waits for the flight before
// to land, closes it to boarding, makes the one write for every item on
// board, and lands it with the outcome; the others wait for the landing
// and share the outcome. So one flight is in the air at a time, and the
// items that come meanwhile go out together next, in the order they
// boarded.
//
// On one processor hardly anything boards while a write(2) runs: the
// goroutines that will write next are ready to run, not running. So while
// the gateway is busy (a flight found company within the last Linger
// flights) the departing caller first lets them run (runtime.Gosched),
// and the calls finishing at that moment board its flight. The audit
// trail's flights at 16 callers over HTTP carried 1.25 records without
// that, 4-5 with it. A lone caller never yields: on 2 CPUs yielding wakes
// an idle processor's thread (a futex call), which took an audit record
// from 7.5 µs to 11-14.
package flights

import (
	"runtime"
	"sync"
)

// Linger is how many flights still yield after the last one that found
// company: a yield does not always find one, and without it the flights
// after are back to one item each.
const Linger = 64

// Group is where flights of items of type T board, each written with one
// write whose outcome is an R. The zero Group is ready to use; it must not
// be copied after first use.
type Group[T, R any] struct {
	mu       sync.Mutex
	boarding *Flight[T, R] // the flight items join; nil: the next Board starts one
	last     *Flight[T, R] // the flight started last (boarding, in the air or landed)
	linger   int           // flights still to yield since the last that found company
}

// Flight is a group of items written with one write.
type Flight[T, R any] struct {
	Items  []T
	Result R // set by the departing caller before Land

	before *Flight[T, R] // the flight written before this one, until it has landed
	done   chan struct{}
	yield  bool
	size   int // len(Items) once departed (Items are let go of at Land)
}

// Board adds item to the flight that is boarding, or starts one. first
// reports whether item started it: the caller must then Depart it, write
// its Items and Land it; otherwise it waits with Wait.
func (g *Group[T, R]) Board(item T) (f *Flight[T, R], first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f = g.boarding; f != nil {
		f.Items = append(f.Items, item)
		return f, false
	}
	f = &Flight[T, R]{Items: append(make([]T, 0, 4), item), before: g.last, done: make(chan struct{})}
	if f.before != nil && (f.before.size > 1 || !f.before.landed()) {
		g.linger = Linger
	} else if g.linger > 0 {
		g.linger--
	}
	f.yield = g.linger > 0
	g.boarding, g.last = f, f
	return f, true
}

// Depart waits for the flight before f to land, yields while the group is
// busy, and closes f to boarding: its Items are then final.
func (g *Group[T, R]) Depart(f *Flight[T, R]) {
	if f.before != nil {
		<-f.before.done
		f.before = nil // flights must not chain back to the first
	}
	if f.yield {
		runtime.Gosched()
	}
	g.mu.Lock()
	g.boarding = nil
	f.size = len(f.Items)
	g.mu.Unlock()
}

// Land ends f's write: Wait returns for everyone on board, and the next
// flight may depart. f lets go of its Items (the group keeps the last
// flight until the next one starts: a large request must not stay with it).
func (f *Flight[T, R]) Land() {
	f.Items = nil
	close(f.done)
}

// Wait waits for f to land and returns its Result.
func (f *Flight[T, R]) Wait() R {
	<-f.done
	return f.Result
}

func (f *Flight[T, R]) landed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
