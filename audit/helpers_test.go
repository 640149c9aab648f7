package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeFS stands between the Log and its files: it fails writes, truncates
// and fsyncs on demand, counts fsyncs (without doing them: the tests check
// when the Log asks, not the disk), and drives the interval flusher's
// ticker by hand.
type fakeFS struct {
	mu       sync.Mutex
	writeErr error // writes fail with it while set
	partial  bool  // a failing write first writes half its bytes
	lines    int   // a failing write first writes this many whole lines
	truncErr error
	syncErr  error

	syncs    atomic.Int64
	entered  chan struct{} // if set, gets a value as each Sync starts
	gate     chan struct{} // if set, each Sync waits for a value
	wrote    chan struct{} // if set, gets a value for each line a successful write wrote
	writing  chan struct{} // if set, gets a value as each write starts
	writeGo  chan struct{} // if set, each write waits for a value
	writes   atomic.Int64  // write calls
	tick     chan time.Time
	stopped  atomic.Bool // the ticker was stopped
	interval time.Duration
}

func newFakeFS() *fakeFS { return &fakeFS{tick: make(chan time.Time)} }

func (fs *fakeFS) set(f func(*fakeFS)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f(fs)
}

func (fs *fakeFS) hooks() hooks {
	return hooks{
		open: func(path string) (file, error) {
			f, err := realHooks.open(path)
			if err != nil {
				return nil, err
			}
			return &fakeFile{File: f.(*os.File), fs: fs}, nil
		},
		tick: func(d time.Duration) (<-chan time.Time, func()) {
			fs.interval = d
			return fs.tick, func() { fs.stopped.Store(true) }
		},
	}
}

type fakeFile struct {
	*os.File
	fs *fakeFS
}

func (f *fakeFile) Write(b []byte) (int, error) {
	f.fs.writes.Add(1)
	if f.fs.writing != nil {
		f.fs.writing <- struct{}{}
	}
	if f.fs.writeGo != nil {
		<-f.fs.writeGo
	}
	f.fs.mu.Lock()
	werr, partial, lines := f.fs.writeErr, f.fs.partial, f.fs.lines
	f.fs.mu.Unlock()
	if werr != nil {
		n := 0
		switch {
		case partial:
			n, _ = f.File.Write(b[:len(b)/2])
		case lines > 0:
			end := 0
			for range lines {
				end += bytes.IndexByte(b[end:], '\n') + 1
			}
			n, _ = f.File.Write(b[:end])
		}
		return n, werr
	}
	n, err := f.File.Write(b)
	if err == nil && f.fs.wrote != nil {
		for range bytes.Count(b, []byte("\n")) {
			f.fs.wrote <- struct{}{}
		}
	}
	return n, err
}

func (f *fakeFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	err := f.fs.truncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *fakeFile) Sync() error {
	f.fs.syncs.Add(1)
	if f.fs.entered != nil {
		f.fs.entered <- struct{}{}
	}
	if f.fs.gate != nil {
		<-f.fs.gate
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.syncErr
}

// errorLog collects what OnError is given.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorLog) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errorLog) list() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// openTest opens a trail in a fresh directory through fs (nil: the real
// file system), with a fixed clock; Close runs at cleanup.
func openTest(t testing.TB, o Options, fs *fakeFS) *Log {
	t.Helper()
	if o.Path == "" {
		o.Path = filepath.Join(t.TempDir(), "audit.log")
	}
	if o.Now == nil {
		o.Now = fixedClock
	}
	h := realHooks
	h.statEvery = 0 // every record checks the path, unless a test paces it
	if fs != nil {
		h = fs.hooks()
	}
	return openWith(t, o, h)
}

// openWith opens a trail at o.Path with hooks h; Close runs at cleanup.
func openWith(t testing.TB, o Options, h hooks) *Log {
	t.Helper()
	l, err := open(o, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// rec is a call record told apart by n.
func rec(n int) Record {
	return Record{Kind: KindCall, Principal: "alice", Tool: "orders/get_order", Decision: DecisionAllowed,
		Args: json.RawMessage(fmt.Sprintf(`{"order_id":%d}`, n)), Attempts: 1, DurationMS: int64(n)}
}

func appendN(t testing.TB, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := l.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// writeTrail writes a clean trail of n records to a new file and returns
// its path.
func writeTrail(t *testing.T, n int) string {
	t.Helper()
	l := openTest(t, Options{Fsync: FsyncNever}, nil)
	appendN(t, l, 1, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return l.opts.Path
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(bytes.TrimSuffix(b, []byte("\n"))), "\n")
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	var s string
	for _, l := range lines {
		s += strings.TrimSuffix(l, "\n") + "\n"
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustVerify(t *testing.T, paths ...string) Report {
	t.Helper()
	rep, err := Verify(paths...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func parseLine(t *testing.T, ln string) Record {
	t.Helper()
	var r Record
	if err := json.Unmarshal([]byte(ln), &r); err != nil {
		t.Fatalf("line %q: %v", ln, err)
	}
	return r
}
