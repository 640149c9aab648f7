package flights

import (
	"slices"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writer makes each flight's write: it records the items written together
// and, while hold is set, waits for a value on it first.
type writer struct {
	g       Group[int, int]
	writes  [][]int
	started chan struct{} // if set, gets a value as each write starts
	hold    chan struct{} // if set, each write waits for a value
}

// put is what a caller of the package does: board, and write the flight
// it started.
func (w *writer) put(item int) int {
	f, first := w.g.Board(item)
	if first {
		w.g.Depart(f)
		if w.started != nil {
			w.started <- struct{}{}
		}
		if w.hold != nil {
			<-w.hold
		}
		w.writes = append(w.writes, slices.Clone(f.Items))
		f.Result = len(w.writes)
		f.Land()
	}
	return f.Wait()
}

// Items that come while a flight is in the air board the next one, in
// order, and share its outcome; one flight is in the air at a time.
func TestItemsDuringAWriteBoardTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &writer{started: make(chan struct{}), hold: make(chan struct{})}
		got := make(chan int, 4)
		go func() { got <- w.put(1) }()
		<-w.started
		for i := 2; i <= 4; i++ {
			go func() { got <- w.put(i) }()
			synctest.Wait() // boarded, in this order
		}
		w.hold <- struct{}{}
		<-w.started
		w.hold <- struct{}{}
		outcomes := []int{<-got, <-got, <-got, <-got}
		slices.Sort(outcomes)
		if want := [][]int{{1}, {2, 3, 4}}; !slices.EqualFunc(w.writes, want, slices.Equal) {
			t.Fatalf("writes %v, want %v", w.writes, want)
		}
		if want := []int{1, 2, 2, 2}; !slices.Equal(outcomes, want) {
			t.Fatalf("outcomes %v, want %v (the first write's, then the second's three times)", outcomes, want)
		}
		if f := w.g.last; f.before != nil || f.Items != nil || f.size != 3 {
			t.Fatalf("the landed flight keeps the one before (%v) or its items (%v), size %d: want neither, 3", f.before != nil, f.Items, f.size)
		}
	})
}

// A lone caller never yields; after a flight that found company, the next
// Linger flights yield, and then they stop.
func TestYieldOnlyWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &writer{}
		yields := func(n int) (yielded int) {
			for i := range n {
				f, first := w.g.Board(i)
				if !first {
					t.Fatal("a lone caller joined a flight")
				}
				if f.yield {
					yielded++
				}
				w.g.Depart(f)
				f.Land()
			}
			return yielded
		}
		if y := yields(10); y != 0 {
			t.Fatalf("%d of 10 lone flights yielded", y)
		}
		w.started, w.hold = make(chan struct{}), make(chan struct{})
		go w.put(1)
		<-w.started
		for i := 2; i <= 3; i++ {
			go w.put(i)
		}
		synctest.Wait()
		if !w.g.boarding.yield {
			t.Fatal("the flight boarding while one is in the air does not yield")
		}
		w.hold <- struct{}{}
		<-w.started
		w.hold <- struct{}{}
		synctest.Wait()
		// The first lone flight follows the flight of two, so it starts
		// the count again.
		if y := yields(Linger + 5); y != Linger {
			t.Fatalf("%d lone flights yielded after a busy one, want %d", y, Linger)
		}
	})
}
