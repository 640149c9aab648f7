package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A fresh trail starts at seq 1 with the zero prev; each line chains to
// the exact bytes of the one before; Verify accepts it.
func TestAppendChains(t *testing.T) {
	path := writeTrail(t, 5)
	lines := readLines(t, path)
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5", len(lines))
	}
	prev := ZeroHash
	for i, ln := range lines {
		r := parseLine(t, ln)
		if r.Seq != uint64(i+1) || r.Prev != prev {
			t.Fatalf("line %d: seq %d prev %s, want %d %s", i+1, r.Seq, r.Prev, i+1, prev)
		}
		if !strings.HasPrefix(ln, fmt.Sprintf(`{"seq":%d,"prev":"%s","time":"2026-11-30T08:15:00.120000000Z","kind":"call"`, i+1, prev)) {
			t.Fatalf("line %d does not start with seq, prev, time, kind: %s", i+1, ln)
		}
		prev = hashLine([]byte(strings.TrimSuffix(ln, "\n")))
	}
	rep := mustVerify(t, path)
	want := Report{Files: 1, Records: 5, FirstSeq: 1, LastSeq: 5, LastHash: prev}
	if rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

// Reopening continues the chain from the last line: seq and prev carry on
// across restarts, also when a crash left the current file missing right
// after rotation renamed it.
func TestReopenContinues(t *testing.T) {
	path := writeTrail(t, 3)
	l := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	appendN(t, l, 4, 2)
	l.Close()
	if rep := mustVerify(t, path); rep.Records != 5 || rep.FirstSeq != 1 || rep.LastSeq != 5 {
		t.Fatalf("after reopen: %+v", rep)
	}

	// The crash: rotation renamed the file, and no new file was written yet.
	if err := os.Rename(path, rotated(path, 1)); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	appendN(t, l, 6, 1)
	l.Close()
	rep := mustVerify(t, rotated(path, 1), path)
	if rep.Records != 6 || rep.LastSeq != 6 || rep.MidChain {
		t.Fatalf("after a crash mid-rotation: %+v", rep)
	}
}

// Open refuses a trail whose last line it cannot chain to, naming file and
// line and saying what to do.
func TestOpenRefusesDamagedTail(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(lines []string) []string
		inRotate bool // the damage is in path.1 and path is empty
		want     []string
	}{
		{"partial last line", func(ls []string) []string { return append(ls[:2], ls[2][:40]) }, false,
			[]string{":3: the last line is incomplete (no newline)", "truncate -s "}},
		{"last line not JSON", func(ls []string) []string { return append(ls[:2], "garbage\n") }, false,
			[]string{":3: the last line is not an audit record (not a JSON object"}},
		{"last line without seq", func(ls []string) []string { return append(ls[:2], `{"prev":"x","kind":"call"}`+"\n") }, false,
			[]string{":3: the last line is not an audit record (no \"seq\""}},
		{"last line of path.1", func(ls []string) []string { return append(ls[:1], "{}\n") }, true,
			[]string{".1:2: the last line is not an audit record"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTrail(t, 3)
			target := path
			if tt.inRotate {
				target = rotated(path, 1)
				if err := os.Rename(path, target); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lines := tt.damage(readLines(t, target))
			if err := os.WriteFile(target, []byte(strings.Join(lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Options{Path: path})
			if err == nil {
				t.Fatal("opened")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), target+w) && !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), target+":") {
				t.Errorf("error %q does not name %s:line", err, target)
			}
		})
	}
}

// 64 goroutines appending at once, across rotations: every line is whole,
// every record is there exactly once, and the chain verifies.
func TestConcurrentAppendsNeverInterleave(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		t.Run(string(policy), func(t *testing.T) {
			const writers, each = 64, 40
			fs := newFakeFS()
			l := openTest(t, Options{Fsync: policy, MaxBytes: 64 << 10, MaxFiles: 1000}, fs)
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range each {
						r := rec(i)
						r.Principal = fmt.Sprintf("writer-%d-%d", g, i)
						r.Reason = strings.Repeat("x", g*7) // lines of different lengths
						if err := l.Append(r); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			l.Close()
			files := series(t, l.opts.Path)
			if len(files) < 3 {
				t.Fatalf("only %d files: rotation was not exercised", len(files))
			}
			rep := mustVerify(t, files...)
			if rep.Records != writers*each || rep.LastSeq != writers*each || rep.MidChain {
				t.Fatalf("report %+v, want %d records from seq 1", rep, writers*each)
			}
			seen := map[string]bool{}
			for _, f := range files {
				for _, ln := range readLines(t, f) {
					seen[parseLine(t, ln).Principal] = true
				}
			}
			if len(seen) != writers*each {
				t.Fatalf("%d distinct records, want %d", len(seen), writers*each)
			}
			if policy == FsyncAlways && (fs.syncs.Load() == 0 || fs.syncs.Load() > writers*each+int64(len(files))) {
				t.Errorf("%d fsyncs for %d records", fs.syncs.Load(), writers*each)
			}
			if policy == FsyncNever && fs.syncs.Load() != 0 {
				t.Errorf("%d fsyncs with fsync: never", fs.syncs.Load())
			}
		})
	}
}

// series lists the trail's files oldest first.
func series(t *testing.T, path string) []string {
	t.Helper()
	var files []string
	for i := 1; ; i++ {
		if _, err := os.Stat(rotated(path, i)); err != nil {
			break
		}
		files = append([]string{rotated(path, i)}, files...)
	}
	return append(files, path)
}

// A failed write is returned, shown by Err and OnError, and leaves no
// partial line; the failed record gets no seq; the next good write clears
// the health.
func TestWriteFailureIsReported(t *testing.T) {
	full := fmt.Errorf("write: %w", syscall.ENOSPC)
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			fs := newFakeFS()
			var errs errorLog
			l := openTest(t, Options{Fsync: FsyncAlways, OnError: errs.add}, fs)
			appendN(t, l, 1, 2)
			fs.set(func(fs *fakeFS) { fs.writeErr, fs.partial = full, partial })
			err := l.Append(rec(3))
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), l.opts.Path) {
				t.Fatalf("Append: %v, want ENOSPC naming the file", err)
			}
			if !errors.Is(l.Err(), syscall.ENOSPC) || len(errs.list()) != 1 || !errors.Is(errs.list()[0], syscall.ENOSPC) {
				t.Fatalf("Err %v, OnError %v", l.Err(), errs.list())
			}
			fs.set(func(fs *fakeFS) { fs.writeErr = nil })
			appendN(t, l, 4, 1)
			if l.Err() != nil {
				t.Fatalf("Err after a good write: %v", l.Err())
			}
			l.Close()
			if rep := mustVerify(t, l.opts.Path); rep.Records != 3 || rep.LastSeq != 3 {
				t.Fatalf("report %+v: want the 3 written records, seq 1..3", rep)
			}
		})
	}
}

// A partial write that cannot be undone stops the trail: the next Append
// refuses to chain to the partial line, and keeps failing, until someone
// repairs the file.
func TestPartialWriteNotUndoneStopsTheTrail(t *testing.T) {
	fs := newFakeFS()
	l := openTest(t, Options{Fsync: FsyncNever}, fs)
	appendN(t, l, 1, 1)
	fs.set(func(fs *fakeFS) { fs.writeErr, fs.partial, fs.truncErr = syscall.EIO, true, syscall.EIO })
	if err := l.Append(rec(2)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append: %v", err)
	}
	fs.set(func(fs *fakeFS) { fs.writeErr, fs.truncErr = nil, nil })
	for range 2 {
		if err := l.Append(rec(3)); err == nil || !strings.Contains(err.Error(), l.opts.Path+":2: the last line is incomplete") {
			t.Fatalf("Append after a partial line: %v", err)
		}
	}
	if l.Err() == nil {
		t.Fatal("Err is nil while the trail cannot be written")
	}
}

// An fsync of earlier records that succeeds after a later write failed
// does not mark the trail healthy: with fsync always (the group fsync runs
// while the next records are written) and with the interval flusher.
func TestFsyncAfterAFailedWriteKeepsTheFailure(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		fs := newFakeFS()
		fs.entered, fs.gate = make(chan struct{}), make(chan struct{})
		l := openTest(t, Options{Fsync: FsyncAlways}, fs)
		first := make(chan error, 1)
		go func() { first <- l.Append(rec(1)) }()
		<-fs.entered // rec(1)'s fsync runs, and is held
		fs.set(func(fs *fakeFS) { fs.writeErr = syscall.ENOSPC })
		if err := l.Append(rec(2)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append: %v, want ENOSPC", err)
		}
		fs.gate <- struct{}{} // rec(1)'s fsync ends, successfully
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := l.Err(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Err after the earlier fsync succeeded: %v, want the later write's ENOSPC", err)
		}
		fs.set(func(fs *fakeFS) { fs.writeErr, fs.entered, fs.gate = nil, nil, nil })
		appendN(t, l, 3, 1)
		if err := l.Err(); err != nil {
			t.Fatalf("Err after a record was written and synced: %v", err)
		}
	})
	t.Run("interval", func(t *testing.T) {
		fs := newFakeFS()
		l := openTest(t, Options{Fsync: FsyncInterval, FsyncInterval: time.Second}, fs)
		appendN(t, l, 1, 1)
		fs.set(func(fs *fakeFS) { fs.writeErr = syscall.ENOSPC })
		if err := l.Append(rec(2)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append: %v, want ENOSPC", err)
		}
		fs.tick <- time.Now() // flushes rec(1)
		fs.tick <- time.Now() // returns once the first tick was handled
		if n := fs.syncs.Load(); n != 1 {
			t.Fatalf("%d fsyncs, want 1", n)
		}
		if err := l.Err(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Err after the flush: %v, want the later write's ENOSPC", err)
		}
	})
}

// With fsync: always, a failed fsync fails the Append: the record may not
// be on disk.
func TestSyncFailureIsReported(t *testing.T) {
	fs := newFakeFS()
	var errs errorLog
	l := openTest(t, Options{Fsync: FsyncAlways, OnError: errs.add}, fs)
	fs.set(func(fs *fakeFS) { fs.syncErr = syscall.EIO })
	if err := l.Append(rec(1)); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("Append: %v", err)
	}
	if !errors.Is(l.Err(), syscall.EIO) || len(errs.list()) != 1 {
		t.Fatalf("Err %v, OnError %v", l.Err(), errs.list())
	}
	fs.set(func(fs *fakeFS) { fs.syncErr = nil })
	appendN(t, l, 2, 1)
	if l.Err() != nil {
		t.Fatalf("Err after a good append: %v", l.Err())
	}
}

// When the file is moved away or deleted behind the Log's back, the next
// record goes to a new file at the path, the chain carries on, and OnError
// hears of it.
func TestFileMovedOrRemoved(t *testing.T) {
	for _, removed := range []bool{false, true} {
		t.Run(fmt.Sprintf("removed=%v", removed), func(t *testing.T) {
			var errs errorLog
			l := openTest(t, Options{Fsync: FsyncAlways, OnError: errs.add}, nil)
			appendN(t, l, 1, 2)
			moved := l.opts.Path + ".moved"
			if err := os.Rename(l.opts.Path, moved); err != nil {
				t.Fatal(err)
			}
			if removed {
				os.Remove(moved)
			}
			appendN(t, l, 3, 1)
			if got := errs.list(); len(got) != 1 || !strings.Contains(got[0].Error(), "moved, removed or replaced") {
				t.Fatalf("OnError got %v", got)
			}
			if l.Err() != nil {
				t.Fatalf("Err %v: the record was written", l.Err())
			}
			l.Close()
			if rep := mustVerify(t, l.opts.Path); rep.FirstSeq != 3 || !rep.MidChain {
				t.Fatalf("new file alone: %+v", rep)
			}
			if !removed {
				if rep := mustVerify(t, moved, l.opts.Path); rep.Records != 3 || rep.MidChain {
					t.Fatalf("report %+v", rep)
				}
			}
		})
	}
}

// The path check is paced: records written within statEvery of a move
// still go to the moved file, the first one after it goes to a new file
// at the path, and the chain runs across both.
func TestFileMovedNoticedWithinStatEvery(t *testing.T) {
	var errs errorLog
	now := time.Unix(1000, 0)
	h := realHooks
	h.clock = func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openWith(t, Options{Path: path, Fsync: FsyncNever, OnError: errs.add, Now: fixedClock}, h)
	appendN(t, l, 1, 1) // checks, and sets the next check replacedCheckEvery on
	moved := path + ".moved"
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, 2) // within replacedCheckEvery: not looked at
	if got := errs.list(); len(got) != 0 {
		t.Fatalf("OnError before the next check: %v", got)
	}
	now = now.Add(replacedCheckEvery)
	appendN(t, l, 4, 1)
	if got := errs.list(); len(got) != 1 || !strings.Contains(got[0].Error(), "moved, removed or replaced") {
		t.Fatalf("OnError got %v", got)
	}
	l.Close()
	if rep := mustVerify(t, moved); rep.Records != 3 {
		t.Fatalf("moved file: %+v", rep)
	}
	if rep := mustVerify(t, moved, path); rep.Records != 4 || rep.MidChain {
		t.Fatalf("both files: %+v", rep)
	}
}

// With FailClosed every record checks the path, however recent the last
// check: the first record after a move goes to a new file at the path,
// none to the moved file.
func TestFailClosedChecksThePathOnEveryRecord(t *testing.T) {
	var errs errorLog
	h := realHooks
	h.clock = func() time.Time { return time.Unix(1000, 0) } // never past the pacing
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openWith(t, Options{Path: path, Fsync: FsyncNever, FailClosed: true, OnError: errs.add, Now: fixedClock}, h)
	appendN(t, l, 1, 1)
	moved := path + ".moved"
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, 1)
	if got := errs.list(); len(got) != 1 || !strings.Contains(got[0].Error(), "moved, removed or replaced") {
		t.Fatalf("OnError got %v", got)
	}
	l.Close()
	if rep := mustVerify(t, moved); rep.Records != 1 {
		t.Fatalf("moved file: %+v", rep)
	}
	if rep := mustVerify(t, moved, path); rep.Records != 2 || rep.MidChain {
		t.Fatalf("both files: %+v", rep)
	}
}

// What each fsync policy asks of the disk: always once per record (before
// Append returns), interval only when the ticker fires and something was
// written, never not at all; Close flushes what is left (except never).
func TestFsyncPolicies(t *testing.T) {
	tests := []struct {
		policy                    FsyncPolicy
		afterAppends, afterClose  int64
		appendAfterTicks, flushed bool
	}{
		{FsyncAlways, 3, 3, false, false},
		{FsyncInterval, 0, 2, true, true},
		{FsyncNever, 0, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			fs := newFakeFS()
			l := openTest(t, Options{Fsync: tt.policy, FsyncInterval: 250 * time.Millisecond}, fs)
			appendN(t, l, 1, 3)
			if got := fs.syncs.Load(); got != tt.afterAppends {
				t.Fatalf("fsyncs after 3 appends: %d, want %d", got, tt.afterAppends)
			}
			if tt.policy == FsyncInterval {
				if fs.interval != 250*time.Millisecond {
					t.Fatalf("ticker interval %s", fs.interval)
				}
				// The ticker channel is unbuffered: a send returns once the
				// flusher has taken it, so after the third send the first two
				// ticks are fully handled. Only the first finds work.
				for range 3 {
					fs.tick <- time.Now()
				}
				if got := fs.syncs.Load(); got != 1 {
					t.Fatalf("fsyncs after three ticks: %d, want 1", got)
				}
				appendN(t, l, 4, 1) // left for Close to flush
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := fs.syncs.Load(); got != tt.afterClose {
				t.Fatalf("fsyncs after Close: %d, want %d", got, tt.afterClose)
			}
			if tt.policy == FsyncInterval && !fs.stopped.Load() {
				t.Fatal("Close did not stop the ticker")
			}
		})
	}
}

// With fsync: always, Append does not return before its fsync has; records
// written while one fsync runs share the next one (group commit).
func TestAlwaysWaitsAndGroupsFsyncs(t *testing.T) {
	fs := newFakeFS()
	fs.entered, fs.gate, fs.wrote = make(chan struct{}), make(chan struct{}), make(chan struct{}, 100)
	l := openTest(t, Options{Fsync: FsyncAlways}, fs)
	first := make(chan error)
	go func() { first <- l.Append(rec(1)) }()
	<-fs.entered
	<-fs.wrote
	select {
	case err := <-first:
		t.Fatalf("Append returned (%v) while its fsync was still running", err)
	default:
	}
	const waiting = 10
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() {
			if err := l.Append(rec(2 + i)); err != nil {
				t.Error(err)
			}
		})
	}
	for range waiting {
		<-fs.wrote // all ten are written, none flushed
	}
	fs.gate <- struct{}{} // the first fsync ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-fs.entered // one fsync for the ten
	fs.gate <- struct{}{}
	wg.Wait()
	if got := fs.syncs.Load(); got != 2 {
		t.Fatalf("%d fsyncs, want 2 (one for the first record, one for the ten written meanwhile)", got)
	}
	fs.gate, fs.entered = nil, nil // Close's own check needs no fsync: nothing is left
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseAndOptions(t *testing.T) {
	l := openTest(t, Options{}, nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.Append(rec(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if l.Err() != nil {
		t.Fatalf("Err after Close: %v", l.Err())
	}
	dir := t.TempDir()
	bad := []Options{
		{},
		{Path: filepath.Join(dir, "a.log"), Fsync: "sometimes"},
		{Path: filepath.Join(dir, "missing", "a.log")},
	}
	for _, o := range bad {
		if l, err := Open(o); err == nil {
			l.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	l, err := Open(Options{Path: filepath.Join(dir, "b.log"), FailClosed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.FailClosed() {
		t.Error("FailClosed not carried")
	}
}

// A file swapped in for the trail (another trail, or someone's copy) is
// not continued: its last line is not the last record this Log wrote.
func TestSwappedFileIsNotContinued(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever}, nil)
	appendN(t, l, 1, 2)
	other := writeTrail(t, 5)
	if err := os.Rename(other, l.opts.Path); err != nil {
		t.Fatal(err)
	}
	err := l.Append(rec(3))
	if err == nil || !strings.Contains(err.Error(), "its last line is not the last record written (seq 2)") {
		t.Fatalf("Append: %v", err)
	}
	if l.Err() == nil {
		t.Fatal("Err is nil")
	}
}

// With fsync: interval, a failed flush shows in Err and OnError, and is
// retried at the next tick.
func TestIntervalFlushFailure(t *testing.T) {
	fs := newFakeFS()
	var errs errorLog
	l := openTest(t, Options{Fsync: FsyncInterval, OnError: errs.add}, fs)
	appendN(t, l, 1, 1)
	fs.set(func(fs *fakeFS) { fs.syncErr = syscall.EIO })
	fs.tick <- time.Now()
	fs.tick <- time.Now() // returns once the first tick is handled
	if !errors.Is(l.Err(), syscall.EIO) || len(errs.list()) == 0 {
		t.Fatalf("Err %v, OnError %v", l.Err(), errs.list())
	}
	// The second tick may still be flushing (and failing); after two more,
	// a flush has certainly succeeded.
	fs.set(func(fs *fakeFS) { fs.syncErr = nil })
	for range 3 {
		fs.tick <- time.Now()
	}
	if l.Err() != nil {
		t.Fatalf("Err after a good flush: %v", l.Err())
	}
	flushed := fs.syncs.Load()
	for range 2 {
		fs.tick <- time.Now()
	}
	if got := fs.syncs.Load(); got != flushed {
		t.Fatalf("%d fsyncs with nothing new written, want %d", got, flushed)
	}
}

// A move the paced check has seen is not forgotten while the Append waits
// for an fsync running outside the lock: the record goes to a new file at
// the path, however long ago the move was (here, before the last check's
// pacing was up), not to the moved file.
func TestFileMovedNoticedWhileAnFsyncRuns(t *testing.T) {
	fs := newFakeFS()
	var errs errorLog
	now := time.Unix(1000, 0)
	var clockMu sync.Mutex
	clocked := make(chan struct{}, 1)
	h := fs.hooks()
	h.statEvery = replacedCheckEvery
	h.clock = func() time.Time {
		select {
		case clocked <- struct{}{}:
		default:
		}
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openWith(t, Options{Path: path, Fsync: FsyncInterval, OnError: errs.add, Now: fixedClock}, h)
	appendN(t, l, 1, 1)
	<-clocked

	// The interval flusher's fsync runs, and holds on.
	fs.entered, fs.gate = make(chan struct{}, 1), make(chan struct{})
	fs.tick <- time.Now()
	<-fs.entered

	moved := path + ".moved"
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	clockMu.Lock()
	now = now.Add(replacedCheckEvery) // the next Append checks
	clockMu.Unlock()
	done := make(chan error, 1)
	go func() { done <- l.Append(rec(2)) }()
	<-clocked   // it checks, under mu...
	l.mu.Lock() // ...and waits for the fsync, which releases mu
	l.mu.Unlock()
	fs.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fs.set(func(fs *fakeFS) { fs.entered, fs.gate = nil, nil })
	l.Close()
	if got := errs.list(); len(got) != 1 || !strings.Contains(got[0].Error(), "moved, removed or replaced") {
		t.Fatalf("OnError got %v", got)
	}
	if rep := mustVerify(t, moved); rep.Records != 1 {
		t.Fatalf("moved file: %+v", rep)
	}
	if rep := mustVerify(t, moved, path); rep.Records != 2 || rep.MidChain {
		t.Fatalf("both files: %+v", rep)
	}
}
