package logsink

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a flush
// timer's).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a destination that keeps each write apart.
type recorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// Lines written within FlushDelay of the first go out together, in order,
// FlushDelay after the first; nothing is written before.
func TestLinesWaitForTheirBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &recorder{}
		w := New(out, Options{FlushDelay: 5 * time.Millisecond})
		defer w.Close()
		for i := range 3 {
			fmt.Fprintf(w, "line %d\n", i)
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if got := out.got(); len(got) != 0 {
			t.Fatalf("written before the flush delay: %q", got)
		}
		time.Sleep(2 * time.Millisecond) // 5 ms after the first line
		synctest.Wait()
		if got := out.got(); len(got) != 1 || got[0] != "line 0\nline 1\nline 2\n" {
			t.Fatalf("writes %q, want the three lines in one write", got)
		}
		fmt.Fprintln(w, "line 3") // a new batch, with its own delay
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if got := out.got(); len(got) != 2 || got[1] != "line 3\n" {
			t.Fatalf("writes %q, want a second write with line 3", got)
		}
	})
}

// Past MaxPending, Write writes everything held before it returns, so a
// burst never grows the buffer without bound.
func TestAFullBufferIsWrittenByTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &recorder{}
		w := New(out, Options{MaxPending: 20})
		defer w.Close()
		fmt.Fprintln(w, "0123456789")
		if got := out.got(); len(got) != 0 {
			t.Fatalf("written before the buffer was full: %q", got)
		}
		fmt.Fprintln(w, "abcdefghij") // 22 bytes held
		if got := out.got(); len(got) != 1 || got[0] != "0123456789\nabcdefghij\n" {
			t.Fatalf("writes %q, want both lines written by the Write that filled the buffer", got)
		}
	})
}

// A destination that stops reading stalls a logger only once MaxPending
// bytes wait: until then lines are held, and none is lost. (Not in a
// synctest bubble: a goroutine waiting on a mutex is not durably blocked.)
func TestAStalledDestinationStallsLoggersOnlyWhenFull(t *testing.T) {
	out := &stalled{entered: make(chan string), release: make(chan struct{})}
	w := New(out, Options{FlushDelay: time.Hour, MaxPending: 64})
	fmt.Fprintln(w, "first")
	flushed := make(chan error)
	go func() { flushed <- w.Flush() }()
	if got := <-out.entered; got != "first\n" {
		t.Fatalf("first write %q", got)
	}
	for i := range 5 { // 5 × 10 bytes: under MaxPending, held while the destination is stalled
		fmt.Fprintf(w, "held %04d\n", i)
	}
	returned := make(chan struct{})
	go func() {
		fmt.Fprintln(w, strings.Repeat("x", 20)) // past MaxPending: this Write writes, and waits
		close(returned)
	}()
	out.release <- struct{}{}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-out.entered:
		if want := "held 0000\nheld 0001\nheld 0002\nheld 0003\nheld 0004\n" + strings.Repeat("x", 20) + "\n"; got != want {
			t.Fatalf("second write %q, want %q", got, want)
		}
	case <-returned:
		t.Fatal("a Write past MaxPending returned without writing (the flush delay is an hour)")
	}
	select {
	case <-returned:
		t.Fatal("a Write past MaxPending returned while the destination was stalled")
	default:
	}
	out.release <- struct{}{}
	<-returned
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// stalled is a destination that announces each write and waits to be
// released.
type stalled struct {
	entered chan string
	release chan struct{}
}

func (s *stalled) Write(p []byte) (int, error) {
	s.entered <- string(p)
	<-s.release
	return len(p), nil
}

// Close writes what is held at once; a line logged after Close is written
// through.
func TestCloseWritesWhatIsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &recorder{}
		w := New(out, Options{FlushDelay: time.Hour})
		fmt.Fprintln(w, "held")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := out.got(); len(got) != 1 || got[0] != "held\n" {
			t.Fatalf("after Close: %q, want the held line", got)
		}
		fmt.Fprintln(w, "late")
		if got := out.got(); len(got) != 2 || got[1] != "late\n" {
			t.Fatalf("after a write after Close: %q, want it written through", got)
		}
	})
}

// A line written while Close runs comes after every line held before it:
// Close marks the Writer closed only once it holds the destination.
func TestLinesStayInOrderAcrossClose(t *testing.T) {
	for iter := range 1000 {
		out := &recorder{}
		w := New(out, Options{FlushDelay: time.Hour})
		var written atomic.Int64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				fmt.Fprintf(w, "%d\n", i)
				written.Add(1)
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		for written.Load() < 10 { // Close while the writer is mid-stream
			runtime.Gosched()
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		all := strings.Split(strings.TrimSuffix(strings.Join(out.got(), ""), "\n"), "\n")
		for i, s := range all {
			if n, _ := strconv.Atoi(s); n != i {
				t.Fatalf("iteration %d: line %d is %q: a line overtook the ones Close was writing", iter, i, s)
			}
		}
	}
}

// An error line is written before Handle returns, with the lines held
// before it; info lines wait.
func TestErrorLinesAreWrittenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &recorder{}
		w := New(out, Options{FlushDelay: time.Hour})
		defer w.Close()
		log := slog.New(Handler(slog.NewTextHandler(w, nil), w)).With("gateway", "a")
		log.Info("tools/call", "tool", "echo")
		log.Warn("slow upstream")
		if got := out.got(); len(got) != 0 {
			t.Fatalf("info and warn written at once: %q", got)
		}
		log.WithGroup("g").Error("HTTP server stopped", "err", "boom")
		got := out.got()
		if len(got) != 1 || strings.Count(got[0], "\n") != 3 || !strings.Contains(got[0], "g.err=boom") ||
			!strings.Contains(got[0], "gateway=a") {
			t.Fatalf("writes %q, want the three lines in one write when the error was logged", got)
		}
	})
}

// Lines logged from many goroutines at once each arrive whole, every one
// of them, and each goroutine's in its order.
func TestConcurrentLinesArriveWhole(t *testing.T) {
	var out bytes.Buffer
	var outMu sync.Mutex
	w := New(writerFunc(func(p []byte) (int, error) {
		outMu.Lock()
		defer outMu.Unlock()
		return out.Write(p)
	}), Options{MaxPending: 4 << 10})
	log := slog.New(Handler(slog.NewTextHandler(w, nil), w))
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				log.Info("tools/call", "writer", g, "seq", i, "pad", strings.Repeat("p", 40))
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	all := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for _, line := range all {
		var g, seq int
		if _, err := fmt.Sscanf(line[strings.Index(line, "writer="):], "writer=%d seq=%d", &g, &seq); err != nil {
			t.Fatalf("line %q cut or mixed: %v", line, err)
		}
		if seq != next[g] {
			t.Fatalf("writer %d: seq %d after %d", g, seq, next[g]-1)
		}
		next[g]++
	}
	if len(all) != writers*lines {
		t.Fatalf("%d lines arrived, want %d", len(all), writers*lines)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
