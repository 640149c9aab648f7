package dedup

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/canonjson"
)

// clock is a manual clock for the table.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestTable returns a table on a manual clock, and a channel that
// receives a value each time a caller starts waiting for a call in flight.
func newTestTable(maxEntries int) (*Table[string], *clock, chan Key) {
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	tb := NewTable[string](maxEntries, clk.Now)
	joined := make(chan Key, 1024)
	tb.onJoin = func(k Key) { joined <- k }
	return tb, clk, joined
}

type outcome struct {
	r   string
	s   Sharing
	err error
}

// goDo runs Do in a goroutine and delivers its outcome.
func goDo(ctx context.Context, tb *Table[string], key Key, window time.Duration, fn func(context.Context) string, record func(string) bool) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, s, err := tb.Do(ctx, key, window, fn, record)
		ch <- outcome{r, s, err}
	}()
	return ch
}

// counter returns an fn that counts its runs and answers "run N".
func counter() (func(context.Context) string, *atomic.Int32) {
	var n atomic.Int32
	return func(context.Context) string { return fmt.Sprintf("run %d", n.Add(1)) }, &n
}

// gated returns an fn that signals started, then waits for release.
func gated(result string) (fn func(context.Context) string, started, release chan struct{}, runs *atomic.Int32) {
	started, release, runs = make(chan struct{}), make(chan struct{}), new(atomic.Int32)
	fn = func(context.Context) string {
		runs.Add(1)
		close(started) // a second run would panic here
		<-release
		return result
	}
	return fn, started, release, runs
}

func expect(t *testing.T, got outcome, r string, s Sharing) {
	t.Helper()
	if got.err != nil || got.r != r || got.s != s {
		t.Fatalf("Do = (%q, %v, %v), want (%q, %v, <nil>)", got.r, got.s, got.err, r, s)
	}
}

var keyA = ArgsKey("alice", "orders/refund_order", []byte(`{"order_id":4821}`))

func TestDoJoinsCallInFlight(t *testing.T) {
	tb, _, joined := newTestTable(10)
	fn, started, release, runs := gated("refunded")
	a := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-started
	b := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-joined
	if in, _ := tb.Len(); in != 1 {
		t.Fatalf("in flight = %d, want 1", in)
	}
	close(release)
	expect(t, <-a, "refunded", Executed)
	expect(t, <-b, "refunded", Joined)
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
}

// TestDoConcurrent drives many goroutines over several keys at once: each
// key runs exactly once, every caller gets its key's result.
func TestDoConcurrent(t *testing.T) {
	const keys, callers = 8, 32
	tb, _, joined := newTestTable(keys)
	var joins [keys]atomic.Int32
	keyOf := map[Key]int{}
	for i := range keys {
		keyOf[ArgsKey("alice", "orders/refund_order", fmt.Appendf(nil, `{"order_id":%d}`, i))] = i
	}
	allJoined := make([]chan struct{}, keys)
	for i := range allJoined {
		allJoined[i] = make(chan struct{})
	}
	go func() { // count joiners per key; release a key's call when all joined
		for range keys * (callers - 1) {
			i := keyOf[<-joined]
			if joins[i].Add(1) == callers-1 {
				close(allJoined[i])
			}
		}
	}()
	var runs [keys]atomic.Int32
	var wg sync.WaitGroup
	results := make(chan outcome, keys*callers)
	for key, i := range keyOf {
		started := make(chan struct{})
		fn := func(context.Context) string {
			runs[i].Add(1)
			close(started)
			<-allJoined[i]
			return fmt.Sprintf("result %d", i)
		}
		wg.Go(func() {
			r, s, err := tb.Do(t.Context(), key, time.Minute, fn, nil)
			results <- outcome{r, s, err}
		})
		<-started
		for range callers - 1 {
			wg.Go(func() {
				r, s, err := tb.Do(t.Context(), key, time.Minute, fn, nil)
				results <- outcome{r, s, err}
			})
		}
	}
	wg.Wait()
	close(results)
	count := map[string]map[Sharing]int{}
	for o := range results {
		if o.err != nil {
			t.Fatal(o.err)
		}
		if count[o.r] == nil {
			count[o.r] = map[Sharing]int{}
		}
		count[o.r][o.s]++
	}
	for i := range keys {
		if n := runs[i].Load(); n != 1 {
			t.Errorf("key %d ran %d times", i, n)
		}
		c := count[fmt.Sprintf("result %d", i)]
		if c[Executed] != 1 || c[Joined] != callers-1 {
			t.Errorf("key %d: %v, want 1 executed and %d joined", i, c, callers-1)
		}
	}
	if in, fin := tb.Len(); in != 0 || fin != keys {
		t.Errorf("Len = %d in flight, %d finished; want 0, %d", in, fin, keys)
	}
}

func TestDoJoinerCancelled(t *testing.T) {
	tb, _, joined := newTestTable(10)
	var fnCtx context.Context
	started, release := make(chan struct{}), make(chan struct{})
	fn := func(ctx context.Context) string {
		fnCtx = ctx
		close(started)
		<-release
		return "refunded"
	}
	a := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-started
	ctxB, cancelB := context.WithCancel(t.Context())
	b := goDo(ctxB, tb, keyA, time.Minute, fn, nil)
	<-joined
	cancelB()
	got := <-b
	if !errors.Is(got.err, context.Canceled) || got.s != Joined || got.r != "" {
		t.Fatalf("cancelled joiner: Do = (%q, %v, %v), want (\"\", joined, context.Canceled)", got.r, got.s, got.err)
	}
	if err := fnCtx.Err(); err != nil {
		t.Fatalf("a joiner's cancellation reached the executing call: %v", err)
	}
	c := goDo(t.Context(), tb, keyA, time.Minute, fn, nil) // another joiner is unaffected
	<-joined
	close(release)
	expect(t, <-a, "refunded", Executed)
	expect(t, <-c, "refunded", Joined)
	r, s, err := tb.Do(t.Context(), keyA, time.Minute, fn, nil)
	expect(t, outcome{r, s, err}, "refunded", Replayed)
}

// TestDoFirstCallerCancelled: fn runs with the first caller's ctx; when that
// is cancelled, joiners get the same outcome and record decides its replay.
func TestDoFirstCallerCancelled(t *testing.T) {
	for _, recordCancelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("record=%v", recordCancelled), func(t *testing.T) {
			tb, _, joined := newTestTable(10)
			started := make(chan struct{})
			var runs atomic.Int32
			fn := func(ctx context.Context) string {
				if runs.Add(1) > 1 {
					return "ran again"
				}
				close(started)
				<-ctx.Done()
				return "cancelled: outcome unknown"
			}
			record := func(r string) bool { return recordCancelled || r != "cancelled: outcome unknown" }
			ctxA, cancelA := context.WithCancel(t.Context())
			a := goDo(ctxA, tb, keyA, time.Minute, fn, record)
			<-started
			b := goDo(t.Context(), tb, keyA, time.Minute, fn, record)
			<-joined
			cancelA()
			expect(t, <-a, "cancelled: outcome unknown", Executed)
			expect(t, <-b, "cancelled: outcome unknown", Joined)
			r, s, err := tb.Do(t.Context(), keyA, time.Minute, fn, record)
			if recordCancelled {
				expect(t, outcome{r, s, err}, "cancelled: outcome unknown", Replayed)
			} else {
				expect(t, outcome{r, s, err}, "ran again", Executed)
			}
		})
	}
}

func TestDoWindow(t *testing.T) {
	const window = 30 * time.Second
	idem := IdempotencyKey("alice", "orders/refund_order", "refund-4821")
	tests := []struct {
		name         string
		key          Key
		recordWindow time.Duration // window of the call that ran
		repeatWindow time.Duration // window of the repeat
		after        time.Duration
		want         Sharing
	}{
		{"at once", keyA, window, window, 0, Replayed},
		{"inside", keyA, window, window, window / 2, Replayed},
		{"just inside", keyA, window, window, window - time.Nanosecond, Replayed},
		{"at the window", keyA, window, window, window, Executed},
		{"after", keyA, window, window, window + time.Hour, Executed},
		{"idempotency key inside its long window", idem, 24 * time.Hour, 24 * time.Hour, 23 * time.Hour, Replayed},
		{"idempotency key at its window", idem, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour, Executed},
		{"repeat asks a shorter window", keyA, time.Hour, time.Minute, 2 * time.Minute, Executed},
		{"repeat asks a longer window", keyA, time.Minute, time.Hour, 2 * time.Minute, Executed},
		{"zero window records nothing", keyA, 0, window, 0, Executed},
		{"negative window records nothing", keyA, -time.Second, window, 0, Executed},
		{"repeat with zero window executes", keyA, window, 0, 0, Executed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, clk, _ := newTestTable(10)
			fn, runs := counter()
			r, s, err := tb.Do(t.Context(), tt.key, tt.recordWindow, fn, nil)
			expect(t, outcome{r, s, err}, "run 1", Executed)
			clk.Advance(tt.after)
			r, s, err = tb.Do(t.Context(), tt.key, tt.repeatWindow, fn, nil)
			want := "run 1"
			if tt.want == Executed {
				want = "run 2"
			}
			expect(t, outcome{r, s, err}, want, tt.want)
			if tt.want == Executed && tt.repeatWindow > 0 { // the new result replaces the old
				r, s, err = tb.Do(t.Context(), tt.key, tt.repeatWindow, fn, nil)
				expect(t, outcome{r, s, err}, "run 2", Replayed)
			}
			if n := runs.Load(); (tt.want == Replayed) != (n == 1) {
				t.Errorf("fn ran %d times", n)
			}
		})
	}
}

// TestDoWindowStartsWhenCallFinishes: the window counts from the end of the
// call, not its start.
func TestDoWindowStartsWhenCallFinishes(t *testing.T) {
	tb, clk, _ := newTestTable(10)
	slow := func(context.Context) string { clk.Advance(time.Hour); return "slow" }
	tb.Do(t.Context(), keyA, time.Minute, slow, nil)
	clk.Advance(59 * time.Second)
	fn, _ := counter()
	r, s, err := tb.Do(t.Context(), keyA, time.Minute, fn, nil)
	expect(t, outcome{r, s, err}, "slow", Replayed)
}

func TestDoRecord(t *testing.T) {
	tests := []struct {
		name   string
		record func(string) bool
		want   Sharing
	}{
		{"nil records", nil, Replayed},
		{"true records", func(string) bool { return true }, Replayed},
		{"false does not", func(string) bool { return false }, Executed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, _, _ := newTestTable(10)
			fn, _ := counter()
			tb.Do(t.Context(), keyA, time.Minute, fn, tt.record)
			_, s, _ := tb.Do(t.Context(), keyA, time.Minute, fn, tt.record)
			if s != tt.want {
				t.Fatalf("repeat: %v, want %v", s, tt.want)
			}
		})
	}
}

// TestDoSeparation: only the same principal, tool and canonical arguments
// (or idempotency key) share a result.
func TestDoSeparation(t *testing.T) {
	canon := func(raw string) []byte {
		c, err := canonjson.Canonical([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	args := canon(`{"order_id":4821,"amount":20}`)
	tests := []struct {
		name string
		key  Key
		want Sharing
	}{
		{"same call respelled", ArgsKey("alice", "orders/refund_order", canon(` { "amount" : 2e1, "order_id" : 4821.0 } `)), Replayed},
		{"other principal", ArgsKey("bob", "orders/refund_order", args), Executed},
		{"other tool", ArgsKey("alice", "orders/cancel_order", args), Executed},
		{"other arguments", ArgsKey("alice", "orders/refund_order", canon(`{"order_id":4821,"amount":21}`)), Executed},
		{"idempotency key, same arguments", IdempotencyKey("alice", "orders/refund_order", "k1"), Executed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, _, _ := newTestTable(10)
			fn, _ := counter()
			tb.Do(t.Context(), ArgsKey("alice", "orders/refund_order", args), time.Minute, fn, nil)
			_, s, _ := tb.Do(t.Context(), tt.key, time.Minute, fn, nil)
			if s != tt.want {
				t.Fatalf("%v, want %v", s, tt.want)
			}
		})
	}
	t.Run("idempotency key takes precedence over arguments", func(t *testing.T) {
		tb, _, _ := newTestTable(10)
		fn, _ := counter()
		tb.Do(t.Context(), IdempotencyKey("alice", "orders/refund_order", "k1"), time.Hour, fn, nil)
		r, s, err := tb.Do(t.Context(), IdempotencyKey("alice", "orders/refund_order", "k1"), time.Hour, fn, nil)
		expect(t, outcome{r, s, err}, "run 1", Replayed)
		r, s, err = tb.Do(t.Context(), IdempotencyKey("bob", "orders/refund_order", "k1"), time.Hour, fn, nil)
		expect(t, outcome{r, s, err}, "run 2", Executed)
	})
}

func TestDoEviction(t *testing.T) {
	tb, clk, _ := newTestTable(2)
	k := func(i int) Key { return ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)) }
	fn, _ := counter()
	for i := 1; i <= 3; i++ {
		tb.Do(t.Context(), k(i), time.Hour, fn, nil)
		clk.Advance(time.Second)
	}
	if _, fin := tb.Len(); fin != 2 {
		t.Fatalf("finished = %d, want 2", fin)
	}
	steps := []struct {
		key  int
		want Sharing
	}{
		{3, Replayed}, // kept: {2,3}
		{2, Replayed},
		{1, Executed}, // evicted first, as the oldest; now {3,1}
		{3, Replayed},
		{2, Executed}, // evicted by 1; now {1,2}
		{1, Replayed},
	}
	for _, st := range steps {
		if _, s, _ := tb.Do(t.Context(), k(st.key), time.Hour, fn, nil); s != st.want {
			t.Fatalf("key %d: %v, want %v", st.key, s, st.want)
		}
	}
}

// With LimitBytes, the finished results kept stay within the bytes given:
// the oldest go first, and a result over a quarter of the bound is given
// to its caller (and to calls that joined it) but not kept for replay.
func TestDoEvictionByBytes(t *testing.T) {
	tb, clk, _ := newTestTable(100)
	tb.LimitBytes(100, func(r string) int64 { return int64(len(r)) }, nil, nil)
	k := func(i int) Key { return ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)) }
	sized := func(n int) func(context.Context) string {
		return func(context.Context) string { return strings.Repeat("x", n) }
	}
	for i := 1; i <= 5; i++ { // 5 × 25 bytes: the first is dropped for the fifth
		tb.Do(t.Context(), k(i), time.Hour, sized(25), nil)
		clk.Advance(time.Second)
	}
	if _, fin := tb.Len(); fin != 4 || tb.Bytes() != 100 {
		t.Fatalf("kept %d results of %d bytes, want 4 of 100", fin, tb.Bytes())
	}
	if _, s, _ := tb.Do(t.Context(), k(2), time.Hour, sized(25), nil); s != Replayed {
		t.Fatalf("the second result: %v, want Replayed", s)
	}
	if _, s, _ := tb.Do(t.Context(), k(1), time.Hour, sized(25), nil); s != Executed { // and now 2 is the oldest, dropped
		t.Fatalf("the first result, over the bound: %v, want Executed", s)
	}
	if r, s, _ := tb.Do(t.Context(), k(9), time.Hour, sized(26), nil); s != Executed || len(r) != 26 {
		t.Fatalf("a result over a quarter of the bound: (%d bytes, %v), want its 26 bytes, Executed", len(r), s)
	}
	if _, s, _ := tb.Do(t.Context(), k(9), time.Hour, sized(26), nil); s != Executed {
		t.Fatalf("its repeat: %v, want Executed (it was not kept)", s)
	}
	if _, fin := tb.Len(); fin != 4 || tb.Bytes() != 100 {
		t.Fatalf("kept %d results of %d bytes, want 4 of 100 (the large one never counted)", fin, tb.Bytes())
	}
	tb.purge(clk.Now().Add(2 * time.Hour))
	if _, fin := tb.Len(); fin != 0 || tb.Bytes() != 0 {
		t.Fatalf("after every window: kept %d results of %d bytes, want none", fin, tb.Bytes())
	}
}

// With strip, a result the bytes bound takes leaves strip's stand-in, which
// keeps its place and window: its repeat is Replayed with the stand-in,
// not run again. Results under lastOut are stripped last. When every result
// kept is stripped and the bytes are still over, the oldest goes whole.
func TestDoEvictionByBytesStrips(t *testing.T) {
	tb, clk, _ := newTestTable(100)
	strip := func(string) string { return "-" }
	tb.LimitBytes(100, func(r string) int64 { return int64(len(r)) }, func(r string) bool { return strings.HasPrefix(r, "K") }, strip)
	k := func(i int) Key { return ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)) }
	result := func(s string) func(context.Context) string { return func(context.Context) string { return s } }
	tb.Do(t.Context(), k(1), time.Hour, result("K"+strings.Repeat("k", 24)), nil) // under lastOut: stripped last
	for i := 2; i <= 5; i++ {
		clk.Advance(time.Second)
		tb.Do(t.Context(), k(i), time.Hour, result(strings.Repeat("x", 25)), nil)
	}
	// 125 bytes: 2 and 3, the oldest not under lastOut, are stripped (25 → 1 each).
	if _, fin := tb.Len(); fin != 5 || tb.Bytes() != 77 {
		t.Fatalf("kept %d results of %d bytes, want 5 of 77", fin, tb.Bytes())
	}
	if r, s, _ := tb.Do(t.Context(), k(2), time.Hour, result("ran again"), nil); s != Replayed || r != "-" {
		t.Fatalf("the stripped result: (%q, %v), want the stand-in, Replayed", r, s)
	}
	if tb.Bytes() > 100 {
		t.Fatalf("%d bytes kept, over the bound", tb.Bytes())
	}
	if r, s, _ := tb.Do(t.Context(), k(1), time.Hour, result("ran again"), nil); s != Replayed || r[0] != 'K' {
		t.Fatalf("the result under lastOut: (%q, %v), want it whole, Replayed", r, s)
	}
	if r, s, _ := tb.Do(t.Context(), k(9), time.Hour, result(strings.Repeat("z", 26)), nil); s != Executed || len(r) != 26 {
		t.Fatalf("a result over a quarter: (%d bytes, %v), want its 26 bytes, Executed", len(r), s)
	}
	if r, s, _ := tb.Do(t.Context(), k(9), time.Hour, result("ran again"), nil); s != Replayed || r != "-" {
		t.Fatalf("its repeat: (%q, %v), want the stand-in, Replayed", r, s)
	}
	tb.purge(clk.Now().Add(2 * time.Hour))
	if _, fin := tb.Len(); fin != 0 || tb.Bytes() != 0 {
		t.Fatalf("after every window: kept %d results of %d bytes, want none", fin, tb.Bytes())
	}

	// Stand-ins alone over the bound: the oldest goes whole.
	small, _, _ := newTestTable(100)
	small.LimitBytes(8, func(r string) int64 { return int64(len(r)) }, nil, func(string) string { return "---" })
	for i := 1; i <= 3; i++ {
		small.Do(t.Context(), k(i), time.Hour, result("abc"), nil) // 3 bytes, over a quarter of 8: stripped to 3
	}
	if _, fin := small.Len(); fin != 2 || small.Bytes() != 6 {
		t.Fatalf("stand-ins over the bound: kept %d of %d bytes, want 2 of 6", fin, small.Bytes())
	}
	if _, s, _ := small.Do(t.Context(), k(1), time.Hour, result("abc"), nil); s != Executed {
		t.Fatalf("the oldest stand-in, dropped: %v, want Executed", s)
	}
}

// A result too large to keep still reaches every call that joined it.
func TestJoinersGetAResultTooLargeToKeep(t *testing.T) {
	tb, _, joined := newTestTable(100)
	tb.LimitBytes(100, func(r string) int64 { return int64(len(r)) }, nil, nil)
	big := strings.Repeat("y", 60)
	fn, started, release, runs := gated(big)
	first := goDo(t.Context(), tb, keyA, time.Hour, fn, nil)
	<-started
	second := goDo(t.Context(), tb, keyA, time.Hour, fn, nil)
	<-joined
	close(release)
	expect(t, <-first, big, Executed)
	expect(t, <-second, big, Joined)
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
	if _, fin := tb.Len(); fin != 0 {
		t.Fatalf("%d results kept, want none", fin)
	}
}

// A joiner that reads only after the call finished and strip replaced the
// kept result still gets the whole result: joiners read the call's own
// outcome, not what a replay gets.
func TestJoinersGetTheWholeResultAfterItWasStripped(t *testing.T) {
	tb, _, _ := newTestTable(100)
	tb.LimitBytes(100, func(r string) int64 { return int64(len(r)) }, nil, func(string) string { return "-" })
	finished, joining := make(chan struct{}), make(chan struct{})
	tb.onJoin = func(Key) { close(joining); <-finished } // the joiner is held after it took the call
	big := strings.Repeat("y", 60)
	fn, started, release, runs := gated(big)
	first := goDo(t.Context(), tb, keyA, time.Hour, fn, nil)
	<-started
	second := goDo(t.Context(), tb, keyA, time.Hour, fn, nil)
	<-joining
	close(release)
	expect(t, <-first, big, Executed)
	close(finished)
	expect(t, <-second, big, Joined)
	if r, s, _ := tb.Do(t.Context(), keyA, time.Hour, fn, nil); s != Replayed || r != "-" || runs.Load() != 1 {
		t.Fatalf("a repeat: (%q, %v) after %d runs, want the stand-in, Replayed, after 1", r, s, runs.Load())
	}
}

// TestDoEvictionSparesCallsInFlight: a call in flight is never evicted,
// however many results finish around it.
func TestDoEvictionSparesCallsInFlight(t *testing.T) {
	tb, _, joined := newTestTable(1)
	fn, started, release, _ := gated("slow")
	a := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-started
	quick, _ := counter()
	for i := range 5 {
		tb.Do(t.Context(), ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)), time.Minute, quick, nil)
	}
	if in, fin := tb.Len(); in != 1 || fin != 1 {
		t.Fatalf("Len = %d in flight, %d finished; want 1, 1", in, fin)
	}
	b := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-joined
	close(release)
	expect(t, <-a, "slow", Executed)
	expect(t, <-b, "slow", Joined)
}

func TestDoNoFinishedEntries(t *testing.T) {
	tb, _, _ := newTestTable(0)
	fn, _ := counter()
	tb.Do(t.Context(), keyA, time.Minute, fn, nil)
	if _, s, _ := tb.Do(t.Context(), keyA, time.Minute, fn, nil); s != Executed {
		t.Fatalf("maxEntries 0 replayed a result")
	}
	if in, fin := tb.Len(); in != 0 || fin != 0 {
		t.Fatalf("Len = %d, %d; want 0, 0", in, fin)
	}
}

// TestDoPurge: expired results are dropped on the next Do, whatever their
// order of finishing (a long window finished first does not shield them).
func TestDoPurge(t *testing.T) {
	tb, clk, _ := newTestTable(100)
	fn, _ := counter()
	tb.Do(t.Context(), IdempotencyKey("alice", "t", "long"), 24*time.Hour, fn, nil)
	for i := range 10 {
		tb.Do(t.Context(), ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)), time.Minute, fn, nil)
	}
	if _, fin := tb.Len(); fin != 11 {
		t.Fatalf("finished = %d, want 11", fin)
	}
	clk.Advance(time.Minute)
	tb.Do(t.Context(), ArgsKey("bob", "t", nil), time.Minute, fn, nil)
	if _, fin := tb.Len(); fin != 2 {
		t.Fatalf("after the short window: finished = %d, want 2 (the long one and the new one)", fin)
	}
	clk.Advance(24 * time.Hour)
	tb.Do(t.Context(), ArgsKey("carol", "t", nil), 0, fn, nil)
	if _, fin := tb.Len(); fin != 0 {
		t.Fatalf("after every window: finished = %d, want 0", fin)
	}
}

func TestDoPanic(t *testing.T) {
	tb, _, joined := newTestTable(10)
	started, boom := make(chan struct{}), make(chan struct{})
	fn := func(context.Context) string {
		close(started)
		<-boom
		panic("boom")
	}
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		tb.Do(t.Context(), keyA, time.Minute, fn, nil)
	}()
	<-started
	b := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-joined
	close(boom)
	if p := <-recovered; p != "boom" {
		t.Fatalf("executing goroutine: recovered %v, want the original panic value", p)
	}
	got := <-b
	var pe *PanicError
	if !errors.As(got.err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 || got.s != Joined {
		t.Fatalf("joiner: Do = (%q, %v, %v), want a *PanicError with the value and a stack", got.r, got.s, got.err)
	}
	if in, fin := tb.Len(); in != 0 || fin != 0 {
		t.Fatalf("Len after panic = %d, %d; want 0, 0", in, fin)
	}
	next, _ := counter()
	r, s, err := tb.Do(t.Context(), keyA, time.Minute, next, nil)
	expect(t, outcome{r, s, err}, "run 1", Executed)
}

func TestDoPanicInRecord(t *testing.T) {
	tb, _, _ := newTestTable(10)
	fn, _ := counter()
	func() {
		defer func() {
			if p := recover(); p != "record failed" {
				t.Fatalf("recovered %v", p)
			}
		}()
		tb.Do(t.Context(), keyA, time.Minute, fn, func(string) bool { panic("record failed") })
	}()
	if in, fin := tb.Len(); in != 0 || fin != 0 {
		t.Fatalf("Len after panic = %d, %d; want 0, 0", in, fin)
	}
}

func TestDoGoexit(t *testing.T) {
	tb, _, joined := newTestTable(10)
	started, exit, exited := make(chan struct{}), make(chan struct{}), make(chan struct{})
	fn := func(context.Context) string {
		close(started)
		<-exit
		runtime.Goexit()
		return "unreachable"
	}
	go func() {
		defer close(exited)
		tb.Do(t.Context(), keyA, time.Minute, fn, nil)
	}()
	<-started
	b := goDo(t.Context(), tb, keyA, time.Minute, fn, nil)
	<-joined
	close(exit)
	<-exited
	got := <-b
	var pe *PanicError
	if !errors.As(got.err, &pe) || pe.Value != nil {
		t.Fatalf("joiner: Do = (%q, %v, %v), want a *PanicError for Goexit", got.r, got.s, got.err)
	}
	if in, fin := tb.Len(); in != 0 || fin != 0 {
		t.Fatalf("Len = %d, %d; want 0, 0", in, fin)
	}
}

func TestSharingString(t *testing.T) {
	for s, want := range map[Sharing]string{Executed: "executed", Joined: "joined", Replayed: "replayed", 0: "Sharing(0)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}

// A joiner of a call that closes its leave channel stops waiting at once
// with ErrLeft (the call's result will not be shared), while the call
// itself runs on; with no leave channel a joiner waits as before.
func TestJoinerLeavesWhenTheCallSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		table := NewTable[int](10, time.Now)
		leave, release := make(chan struct{}), make(chan struct{})
		key := ArgsKey("alice", "orders/get", []byte(`{}`))
		go table.DoLeaving(context.Background(), key, time.Minute, leave, func(context.Context) int { <-release; return 1 }, nil)
		synctest.Wait()
		joined := make(chan error, 1)
		go func() {
			_, sharing, err := table.Do(context.Background(), key, time.Minute, func(context.Context) int { return 2 }, nil)
			if sharing != Joined {
				t.Errorf("sharing %v, want Joined", sharing)
			}
			joined <- err
		}()
		synctest.Wait()
		select {
		case err := <-joined:
			t.Fatalf("the joiner left before the call said so: %v", err)
		default:
		}
		close(leave)
		if err := <-joined; !errors.Is(err, ErrLeft) {
			t.Fatalf("joiner: %v, want ErrLeft", err)
		}
		close(release)
	})
}

// Past the byte bound, results lastOut picks (answers under idempotency
// keys) go only when no other result is left, however old they are.
func TestDoEvictionByBytesSparesLastOut(t *testing.T) {
	tb, clk, _ := newTestTable(100)
	tb.LimitBytes(100, func(r string) int64 { return int64(len(r)) }, func(r string) bool { return strings.HasPrefix(r, "K") }, nil)
	k := func(i int) Key { return ArgsKey("alice", "t", fmt.Appendf(nil, "%d", i)) }
	result := func(s string) func(context.Context) string { return func(context.Context) string { return s } }
	tb.Do(t.Context(), k(1), time.Hour, result("K"+strings.Repeat("k", 24)), nil) // the oldest, keyed
	for i := 2; i <= 5; i++ {
		clk.Advance(time.Second)
		tb.Do(t.Context(), k(i), time.Hour, result(strings.Repeat("x", 25)), nil)
	}
	for i, want := range map[int]Sharing{1: Replayed, 2: Executed, 5: Replayed} {
		if _, s, _ := tb.Do(t.Context(), k(i), time.Hour, result(strings.Repeat("y", 25)), nil); s != want {
			t.Errorf("result %d: %v, want %v (the keyed one outlives the unkeyed oldest)", i, s, want)
		}
	}
}
