package audit

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
)

// startFlight appends rec(1) and returns once its write has started and
// waits for fs.writeGo: the records appended from then on board the next
// flight. done gets rec(1)'s outcome.
func startFlight(t *testing.T, o Options) (fs *fakeFS, l *Log, done chan error) {
	t.Helper()
	fs = newFakeFS()
	fs.writing, fs.writeGo = make(chan struct{}), make(chan struct{})
	l = openTest(t, o, fs)
	done = make(chan error, 1)
	go func() { done <- l.Append(rec(1)) }()
	<-fs.writing
	return fs, l, done
}

// boardN appends rec(from) … rec(from+n-1) on goroutines of their own and
// returns once all of them wait: boarded, or writing and held.
func boardN(l *Log, from, n int) chan error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- l.Append(rec(from + i)) }()
	}
	synctest.Wait()
	return errs
}

// Records appended while a write runs go out together, in one write, once
// it is done, and chain on as if written one by one.
func TestAppendsDuringAWriteShareTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, l, first := startFlight(t, Options{Fsync: FsyncNever, KeepRecent: 20})
		errs := boardN(l, 2, 10)
		if n := fs.writes.Load(); n != 1 {
			t.Fatalf("%d writes while the first is held, want 1", n)
		}
		fs.writeGo <- struct{}{} // the first write ends
		<-fs.writing             // the second starts: the ten in one
		fs.writeGo <- struct{}{}
		for range 10 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if n := fs.writes.Load(); n != 2 {
			t.Fatalf("%d writes for 11 records, want 2 (one for the first, one for the ten)", n)
		}
		fs.writing, fs.writeGo = nil, nil
		appendN(t, l, 12, 1) // chains to the flight's last line, as seq 12
		l.Close()
		if rep := mustVerify(t, l.opts.Path); rep.Records != 12 || rep.LastSeq != 12 {
			t.Fatalf("report %+v: want 12 chained records", rep)
		}
		lines, recent := readLines(t, l.opts.Path), l.Recent(20)
		if len(recent) != 12 || string(recent[0]) != strings.TrimSuffix(lines[11], "\n") {
			t.Fatalf("Recent has %d lines, the newest %q; want 12, the newest %q", len(recent), recent[0], lines[11])
		}
		for i := 1; i < 10; i++ { // newest first: recent[i+1] was written just before recent[i], in one write
			older, newer := recent[i+1], recent[i]
			if c := older[:cap(older)]; len(c) > len(older)+1 && &c[len(older)+1] == &newer[0] {
				t.Fatal("Recent keeps the lines of a flight in the flight's buffer: one kept line holds them all")
			}
		}
	})
}

// A flight whose write fails fails every record in it, leaves no line of
// it in the file, and takes no seq: the next flight chains to the last
// record written before it.
func TestFailedFlightFailsAllItsRecords(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing-written", true: "half-written"}[partial], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var errs errorLog
				fs, l, first := startFlight(t, Options{Fsync: FsyncNever, OnError: errs.add})
				boarded := boardN(l, 2, 5)
				fs.writeGo <- struct{}{}
				if err := <-first; err != nil {
					t.Fatal(err)
				}
				fs.set(func(fs *fakeFS) { fs.writeErr, fs.partial = syscall.ENOSPC, partial })
				<-fs.writing
				fs.writeGo <- struct{}{}
				for range 5 {
					if err := <-boarded; !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), l.opts.Path) {
						t.Fatalf("Append in the failed flight: %v, want ENOSPC naming the file", err)
					}
				}
				if n := len(errs.list()); n != 5 {
					t.Fatalf("OnError told %d times, want once for each of the 5 records lost", n)
				}
				fs.set(func(fs *fakeFS) { fs.writeErr, fs.partial, fs.writing, fs.writeGo = nil, false, nil, nil })
				appendN(t, l, 7, 1)
				l.Close()
				rep := mustVerify(t, l.opts.Path)
				if rep.Records != 2 || rep.LastSeq != 2 {
					t.Fatalf("report %+v: want records 1 and 7 as seq 1 and 2", rep)
				}
				if got := parseLine(t, readLines(t, l.opts.Path)[1]); got.DurationMS != 7 {
					t.Fatalf("second line is record %d, want 7", got.DurationMS)
				}
			})
		})
	}
}

// A failed flight that wrote whole lines before it failed, and that cannot
// be truncated away, stops the trail with the reason: the file ends with
// records reported unwritten (not "another process wrote to it").
func TestFailedFlightOnALineBoundaryNotUndoneStopsTheTrail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, l, first := startFlight(t, Options{Fsync: FsyncNever})
		boarded := boardN(l, 2, 3)
		fs.writeGo <- struct{}{}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		fs.set(func(fs *fakeFS) { fs.writeErr, fs.lines, fs.truncErr = syscall.ENOSPC, 2, syscall.EIO })
		<-fs.writing
		fs.writeGo <- struct{}{}
		for range 3 {
			if err := <-boarded; !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Append in the failed flight: %v, want ENOSPC", err)
			}
		}
		fs.set(func(fs *fakeFS) { fs.writeErr, fs.truncErr, fs.writing, fs.writeGo = nil, nil, nil, nil })
		for range 2 {
			err := l.Append(rec(7))
			if err == nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "could not be truncated away") ||
				!strings.Contains(err.Error(), "after seq 1") || !strings.Contains(err.Error(), "truncate -s ") {
				t.Fatalf("Append after the lines left behind: %v, want the truncate's failure named", err)
			}
		}
	})
}

// With fsync: always every record waits for the fsync that covers it,
// whether its Append wrote its flight or boarded one: the three records
// written while the first one's fsync runs return only after the next
// fsync. Not in a bubble: records waiting for an fsync wait on a mutex.
func TestFlightRecordsEachWaitForTheirFsync(t *testing.T) {
	fs := newFakeFS()
	fs.entered, fs.gate, fs.wrote = make(chan struct{}), make(chan struct{}), make(chan struct{}, 100)
	gate := fs.gate
	l := openTest(t, Options{Fsync: FsyncAlways}, fs)
	t.Cleanup(func() { close(gate) }) // before Close: a failed check must not leave an fsync held
	first := make(chan error, 1)
	go func() { first <- l.Append(rec(1)) }()
	<-fs.wrote
	<-fs.entered // the first record's fsync runs, and is held
	boarded := make(chan error, 3)
	for i := range 3 {
		go func() { boarded <- l.Append(rec(2 + i)) }()
	}
	for range 3 {
		<-fs.wrote // in one flight or several
	}
	select {
	case err := <-boarded:
		t.Fatalf("a record returned (%v) before an fsync covering it had begun", err)
	default:
	}
	fs.gate <- struct{}{} // the first fsync ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-fs.entered // one fsync for the three
	select {
	case err := <-boarded:
		t.Fatalf("a record returned (%v) before its fsync ended", err)
	default:
	}
	fs.gate <- struct{}{}
	for range 3 {
		if err := <-boarded; err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.syncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs, want 2", n)
	}
	fs.set(func(fs *fakeFS) { fs.entered, fs.gate, fs.wrote = nil, nil, nil })
}
