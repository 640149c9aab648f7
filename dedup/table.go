package dedup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Sharing says how a caller of Table.Do got its result.
type Sharing int

const (
	// Executed: this caller ran fn.
	Executed Sharing = iota + 1
	// Joined: an identical call was in flight; this caller waited for it and
	// got its result.
	Joined
	// Replayed: an identical call had finished within the window; this
	// caller got its recorded result and nothing ran.
	Replayed
)

func (s Sharing) String() string {
	switch s {
	case Executed:
		return "executed"
	case Joined:
		return "joined"
	case Replayed:
		return "replayed"
	default:
		return fmt.Sprintf("Sharing(%d)", int(s))
	}
}

// PanicError is the error a joined caller gets when the call it joined did
// not return: fn (or record) panicked, or called runtime.Goexit.
type PanicError struct {
	Value any    // what fn panicked with; nil for runtime.Goexit
	Stack []byte // the executing goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	if e.Value == nil {
		return "dedup: the joined call exited without returning (runtime.Goexit)"
	}
	return fmt.Sprintf("dedup: the joined call panicked: %v", e.Value)
}

// Table remembers calls in flight and, for a window after they finish, their results.
//
// Results are shared between callers as they are: R must be treated as
// immutable once fn returned it (use a value type or never modify what a
// pointer points to).
//
// Memory: at most maxEntries finished results (and, with LimitBytes, at
// most that many of their bytes), plus one entry per call in flight
// (bounded by the callers themselves).
type Table[R any] struct {
	now      func() time.Time
	max      int
	maxBytes int64         // LimitBytes
	sizeOf   func(R) int64 // LimitBytes; nil: no bound by bytes
	lastOut  func(R) bool  // LimitBytes: results evicted by bytes only when no other is left
	strip    func(R) R     // LimitBytes: what a result evicted by bytes leaves behind; nil: nothing
	bytes    int64         // the finished entries' sizeOf, summed

	mu       sync.Mutex
	entries  map[Key]*entry[R] // in flight and finished
	age      entryList[R]      // finished entries in the order they finished, oldest first
	whole    entryList[R]      // those of them not stripped (LimitBytes), in the same order
	expiry   []*expiryQueue[R] // finished entries by expiry, one queue per window, for purging
	finished int               // finished entries kept

	onJoin func(Key) // test hook: a caller is about to wait for a call in flight
}

// entry is one call, in flight or finished. Its fields are guarded by the
// table's mutex.
type entry[R any] struct {
	key  Key
	done chan struct{} // closed when fn returned or panicked
	// leave, when it closes, lets joiners stop waiting (DoLeaving): the
	// result will not be theirs to share.
	leave <-chan struct{}
	// out is what joiners read after done, without the mutex: written once,
	// before done is closed, and never again. Joiners take the pointer
	// while the call is in flight; finish lets go of it, so a kept entry
	// does not hold a whole answer that strip has replaced.
	out *callOutcome[R]

	result R // once finished, what a replay gets (read under the mutex; strip may replace it)

	// Set when the entry is kept as finished.
	kept       bool
	stripped   bool  // result is strip's: the bytes bound took the rest
	size       int64 // sizeOf(result), with LimitBytes
	finishedAt time.Time
	expires    time.Time
	age        link[R] // in Table.age
	whole      link[R] // in Table.whole unless stripped
	queue      *expiryQueue[R]
	expiry     link[R] // in queue
}

// NewTable returns a table that keeps at most maxEntries finished results
// (maxEntries <= 0 keeps none: identical calls in flight are still joined)
// and reads time from now (time.Now when nil).
func NewTable[R any](maxEntries int, now func() time.Time) *Table[R] {
	if now == nil {
		now = time.Now
	}
	return &Table[R]{now: now, max: maxEntries, entries: make(map[Key]*entry[R]),
		age:   entryList[R]{at: func(e *entry[R]) *link[R] { return &e.age }},
		whole: entryList[R]{at: func(e *entry[R]) *link[R] { return &e.whole }}}
}

// LimitBytes bounds the finished results kept by their size as sizeOf
// measures it: at most max bytes in all, and a result over a quarter of max
// is not kept whole, so that one large answer cannot push out every other
// (calls in flight are still joined and get it whole). Past max, the oldest
// results go first, except those lastOut picks (nil: none), which go only
// when no other is left: duplicate suppression keeps answers under
// idempotency keys, which clients retry with, over answers matched by
// arguments alone.
//
// With strip (nil: none), a result the bound takes is not forgotten but
// replaced by strip(result), which should be small (sizeOf counts it too):
// the entry keeps its place and its window, and a repeat gets Replayed with
// what strip left, rather than running again. Only when every result kept
// is already stripped and the bytes are still over max (many entries, a
// small max) does the oldest go entirely. Call it before the table is used.
func (t *Table[R]) LimitBytes(max int64, sizeOf func(R) int64, lastOut func(R) bool, strip func(R) R) {
	t.maxBytes, t.sizeOf, t.lastOut, t.strip = max, sizeOf, lastOut, strip
}

// Do runs fn at most once for key at a time. A caller arriving while an identical call is in flight waits for it (or for
// its own ctx to end) and gets the same result (Joined). Within window after it finished, a caller gets the recorded
// result (Replayed) without running fn. fn's result is recorded only if record(result) is true (the caller decides: e.g.
// a call that was never sent is not recorded, so its repeat runs). Entries older than their window are dropped; at most
// maxEntries finished results are kept (evict oldest); in-flight entries are never evicted.
//
// In detail:
//
//   - Executed: fn runs in the calling goroutine with the caller's ctx, and
//     Do returns its result with a nil error. record may be nil (record
//     every result); it runs once, right after fn, outside the table's lock.
//   - First caller cancelled: fn keeps that ctx, so it sees the
//     cancellation, and whatever it returns (typically "cancelled, outcome
//     unknown") is what every joined caller gets too; record decides whether
//     later repeats replay it. The call is not restarted for the joiners,
//     since the cancelled attempt may already have reached the upstream and
//     a second one could run the side effect twice.
//   - Joined: a joiner whose own ctx ends stops waiting and returns the zero
//     R, Joined and ctx.Err(); the call and its other callers are not
//     affected, and fn's ctx is never cancelled by a joiner.
//   - Panic: if fn (or record) panics, joiners get the zero R, Joined and a
//     *PanicError, nothing is recorded (the next identical call runs), and
//     the panic is re-raised with its original value in the executing
//     goroutine, for its own recovery (the pipeline's turns it into
//     internal_error). runtime.Goexit in fn is treated the same, and goes on
//     exiting the goroutine.
//   - Replayed: a finished result is replayed while now - finished < window
//     for both the window it was recorded with and the caller's window; at or
//     after that, the call executes again and its result replaces the old
//     one. window <= 0 records nothing (only calls in flight are joined).
//   - Time is read from the table's clock: once when Do starts (for replay
//     and purging) and once when fn returns (the start of the window).
//   - Expired results are purged on every Do (O(1) each). Each distinct
//     window keeps a queue for the table's life: use a few fixed windows.
//
// fn must not call Do with the same key: it would wait for itself.
func (t *Table[R]) Do(ctx context.Context, key Key, window time.Duration, fn func(ctx context.Context) R, record func(R) bool) (R, Sharing, error) {
	return t.DoLeaving(ctx, key, window, nil, fn, record)
}

// ErrLeft is what a joiner gets when the call it joined closed its leave
// channel (DoLeaving): its result will not be shared, so the joiner should
// run on its own.
var ErrLeft = errors.New("the call joined will not share its result")

// DoLeaving is Do, where leave, if this call executes, lets the calls that
// join it stop waiting as soon as it closes (they get ErrLeft, at once).
func (t *Table[R]) DoLeaving(ctx context.Context, key Key, window time.Duration, leave <-chan struct{}, fn func(ctx context.Context) R, record func(R) bool) (R, Sharing, error) {
	now := t.now()
	t.mu.Lock()
	t.purge(now)
	if e := t.entries[key]; e != nil {
		if !e.kept {
			onJoin, out := t.onJoin, e.out
			t.mu.Unlock()
			if onJoin != nil {
				onJoin(key)
			}
			return join(ctx, e, out)
		}
		if now.Sub(e.finishedAt) < window && now.Before(e.expires) {
			r := e.result
			t.mu.Unlock()
			return r, Replayed, nil
		}
		t.drop(e)
	}
	e := &entry[R]{key: key, done: make(chan struct{}), leave: leave, out: new(callOutcome[R])}
	t.entries[key] = e
	t.mu.Unlock()
	return t.execute(ctx, e, window, fn, record)
}

// callOutcome is what a call in flight leaves its joiners.
type callOutcome[R any] struct {
	result R
	err    error // *PanicError when fn did not return
}

// join waits for the call in flight, e, or for ctx; out is e's outcome,
// taken under the mutex.
func join[R any](ctx context.Context, e *entry[R], out *callOutcome[R]) (R, Sharing, error) {
	var zero R
	select {
	case <-e.done:
	case <-e.leave:
		select {
		case <-e.done: // finished too: its result says whether it is shared
		default:
			return zero, Joined, ErrLeft
		}
	case <-ctx.Done():
		select {
		case <-e.done: // finished too: a result beats an error
		default:
			return zero, Joined, ctx.Err()
		}
	}
	if out.err != nil {
		return zero, Joined, out.err
	}
	return out.result, Joined, nil
}

// execute runs fn for the new entry e, then records or forgets it and
// releases its joiners.
func (t *Table[R]) execute(ctx context.Context, e *entry[R], window time.Duration, fn func(context.Context) R, record func(R) bool) (R, Sharing, error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover()
		var zero R
		t.finish(e, zero, &PanicError{Value: p, Stack: debug.Stack()}, false, 0)
		if p != nil {
			panic(p)
		}
		// p == nil: runtime.Goexit, which carries on by itself.
	}()
	r := fn(ctx)
	keep := record == nil || record(r)
	returned = true
	t.finish(e, r, nil, keep, window)
	return r, Executed, nil
}

// finish publishes e's outcome to its joiners and keeps it for replay, or
// forgets it.
func (t *Table[R]) finish(e *entry[R], r R, err error, keep bool, window time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now() // under mu: entries reach their expiry queue in clock order
	e.out.result, e.out.err = r, err
	close(e.done)
	e.out, e.result = nil, r
	if !keep || err != nil || window <= 0 || t.max <= 0 {
		delete(t.entries, e.key)
		return
	}
	if t.sizeOf != nil {
		if e.size = t.sizeOf(r); e.size > t.maxBytes/4 {
			if t.strip == nil {
				delete(t.entries, e.key)
				return
			}
			e.result, e.stripped = t.strip(r), true
			e.size = t.sizeOf(e.result)
		}
	}
	e.kept = true
	e.finishedAt = now
	e.expires = now.Add(window)
	t.age.pushNewest(e)
	e.queue = t.expiryQueue(window)
	e.queue.entries.pushNewest(e)
	if !e.stripped {
		t.whole.pushNewest(e)
	}
	t.finished++
	t.bytes += e.size
	for t.finished > t.max {
		t.drop(t.age.oldest)
	}
	for t.sizeOf != nil && t.bytes > t.maxBytes {
		t.evictBytes()
	}
}

// evictBytes takes one result's bytes: strips the entry evictable picks, or
// drops the oldest when there is none to strip. Callers hold mu; there is at
// least one entry.
func (t *Table[R]) evictBytes() {
	e := t.evictable()
	if e == nil || t.strip == nil {
		t.drop(cmp.Or(e, t.age.oldest))
		return
	}
	t.whole.remove(e)
	stripped := t.strip(e.result)
	size := t.sizeOf(stripped)
	t.bytes += size - e.size
	e.result, e.size, e.stripped = stripped, size, true
}

// evictable is the entry whose bytes go first: the oldest not yet stripped
// that lastOut does not pick, else the oldest not yet stripped; nil when
// every entry is stripped. Callers hold mu.
func (t *Table[R]) evictable() *entry[R] {
	if t.lastOut != nil {
		for e := t.whole.oldest; e != nil; e = e.whole.next {
			if !t.lastOut(e.result) {
				return e
			}
		}
	}
	return t.whole.oldest
}

// purge drops the finished entries whose window has passed: the oldest of
// each queue while they have. Callers hold mu.
func (t *Table[R]) purge(now time.Time) {
	for _, q := range t.expiry {
		for e := q.entries.oldest; e != nil && !now.Before(e.expires); e = q.entries.oldest {
			t.drop(e)
		}
	}
}

// expiryQueue holds the finished entries recorded with one window, in the
// order they finished, which is the order they expire in: finish reads the
// clock under the table's mutex. A queue per window makes recording,
// dropping and purging O(1) each; the heap it replaced made about 13
// comparisons a record, each through a pointer to a cold entry, with the
// 10,000 answers the gateway keeps by default (limits.dedup.max_entries),
// about 1% of its CPU at 16 callers. A clock that steps back (a test's)
// only delays a purge: a replay checks its entry's expiry itself.
type expiryQueue[R any] struct {
	window  time.Duration
	entries entryList[R]
}

// expiryQueue is window's queue, made on its first use and kept: windows
// come from the configuration (the gateway's dedup.window and
// dedup.key_window), so there are few, and Do's callers must keep them
// so. Callers hold mu.
func (t *Table[R]) expiryQueue(window time.Duration) *expiryQueue[R] {
	for _, q := range t.expiry {
		if q.window == window {
			return q
		}
	}
	q := &expiryQueue[R]{window: window, entries: entryList[R]{at: func(e *entry[R]) *link[R] { return &e.expiry }}}
	t.expiry = append(t.expiry, q)
	return q
}

// drop forgets the finished entry e. Callers hold mu.
func (t *Table[R]) drop(e *entry[R]) {
	delete(t.entries, e.key)
	t.age.remove(e)
	if !e.stripped {
		t.whole.remove(e)
	}
	e.queue.entries.remove(e)
	e.queue = nil
	t.finished--
	t.bytes -= e.size
}

// entryList is a list of finished entries, oldest first, linked through
// the link at gives of each.
type entryList[R any] struct {
	oldest, newest *entry[R]
	at             func(*entry[R]) *link[R]
}

type link[R any] struct{ prev, next *entry[R] }

func (l *entryList[R]) pushNewest(e *entry[R]) {
	*l.at(e) = link[R]{prev: l.newest}
	if l.newest != nil {
		l.at(l.newest).next = e
	} else {
		l.oldest = e
	}
	l.newest = e
}

func (l *entryList[R]) remove(e *entry[R]) {
	el := l.at(e)
	if el.prev != nil {
		l.at(el.prev).next = el.next
	} else {
		l.oldest = el.next
	}
	if el.next != nil {
		l.at(el.next).prev = el.prev
	} else {
		l.newest = el.prev
	}
	*el = link[R]{}
}

// Bytes is the size of the finished results kept (with LimitBytes).
func (t *Table[R]) Bytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// Len reports the calls in flight and the finished results kept (including
// expired ones not yet purged).
func (t *Table[R]) Len() (inFlight, finished int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries) - t.finished, t.finished
}
