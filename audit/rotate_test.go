package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Rotation by size keeps max_files older files, deletes the oldest, and
// never breaks the chain: the whole series verifies, and so does the
// newest file alone (mid-chain).
func TestRotation(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncAlways, MaxBytes: 700, MaxFiles: 3}, nil)
	appendN(t, l, 1, 20)
	l.Close()
	path := l.opts.Path
	files := series(t, path)
	if len(files) != 4 {
		t.Fatalf("files %v, want the current one and 3 rotated", files)
	}
	if _, err := os.Stat(rotated(path, 4)); !os.IsNotExist(err) {
		t.Fatalf("%s.4 exists (%v): the oldest was not deleted", path, err)
	}
	total := 0
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 700 {
			t.Errorf("%s is %d bytes, over max_bytes", f, st.Size())
		}
		total += len(readLines(t, f))
	}
	rep := mustVerify(t, files...)
	if rep.Records != total || rep.LastSeq != 20 || !rep.MidChain || rep.FirstSeq != uint64(20-total+1) {
		t.Fatalf("series: %+v (%d lines in the files)", rep, total)
	}
	if !strings.Contains(rep.String(), "starts mid-chain") {
		t.Errorf("report does not say it starts mid-chain: %s", rep)
	}
	newest := mustVerify(t, path)
	if !newest.MidChain || newest.LastSeq != 20 {
		t.Fatalf("newest file alone: %+v", newest)
	}
	// The link across files is checked: the first line of the newer file
	// must name the last line of the older one.
	first := parseLine(t, readLines(t, path)[0])
	olderLines := readLines(t, rotated(path, 1))
	if want := hashLine([]byte(strings.TrimSuffix(olderLines[len(olderLines)-1], "\n"))); first.Prev != want {
		t.Fatalf("first prev %s, want the hash of %s.1's last line %s", first.Prev, path, want)
	}
}

// Nothing is deleted while max_files is not reached: the series verifies
// from seq 1. A record larger than max_bytes gets a file of its own.
func TestRotationKeepsWholeChainAndOversizedRecords(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, MaxBytes: 700, MaxFiles: 100}, nil)
	appendN(t, l, 1, 6)
	big := rec(7)
	big.Reason = strings.Repeat("r", 2000)
	if err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 8, 1)
	l.Close()
	files := series(t, l.opts.Path)
	rep := mustVerify(t, files...)
	if rep.MidChain || rep.FirstSeq != 1 || rep.LastSeq != 8 || rep.Records != 8 {
		t.Fatalf("series %v: %+v", files, rep)
	}
	if lines := readLines(t, rotated(l.opts.Path, 1)); len(lines) != 1 || parseLine(t, lines[0]).Seq != 7 {
		t.Fatalf("the oversized record is not alone in %s.1: %d lines", l.opts.Path, len(lines))
	}
}

// Lowering max_files deletes the files beyond it at the next rotation.
func TestRotationAfterMaxFilesLowered(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, MaxBytes: 700, MaxFiles: 10}, nil)
	appendN(t, l, 1, 20)
	l.Close()
	if n := len(series(t, l.opts.Path)); n < 5 {
		t.Fatalf("only %d files", n)
	}
	l = openTest(t, Options{Path: l.opts.Path, Fsync: FsyncNever, MaxBytes: 700, MaxFiles: 2}, nil)
	appendN(t, l, 21, 3)
	l.Close()
	files := series(t, l.opts.Path)
	if len(files) != 3 {
		t.Fatalf("files %v, want the current one and 2 rotated", files)
	}
	if rep := mustVerify(t, files...); rep.LastSeq != 23 {
		t.Fatalf("%+v", rep)
	}
}

// An edit of the last line of an older file is caught by the first line
// of the newer one, and reported at the edited line.
func TestTamperAcrossFiles(t *testing.T) {
	l := openTest(t, Options{Fsync: FsyncNever, MaxBytes: 700, MaxFiles: 100}, nil)
	appendN(t, l, 1, 6)
	l.Close()
	older := rotated(l.opts.Path, 1)
	lines := readLines(t, older)
	last := len(lines)
	lines[last-1] = strings.Replace(lines[last-1], "alice", "mallo", 1)
	writeLines(t, older, lines)
	_, err := Verify(series(t, l.opts.Path)...)
	te, ok := err.(*TamperError)
	if !ok || len(te.Problems) != 1 {
		t.Fatalf("Verify: %v", err)
	}
	if p := te.Problems[0]; p.File != older || p.Line != last || !strings.Contains(p.Msg, "edited") ||
		!strings.Contains(p.Msg, "(line 1 in "+l.opts.Path) {
		t.Fatalf("problem %s, want an edit at %s:%d", p, older, last)
	}
}

// A rotation that fails (here: Path.1 is a directory that cannot be
// replaced) costs no record: it is written to the current file, past
// max_bytes, and OnError hears of the failure.
func TestRotationFailureKeepsRecords(t *testing.T) {
	var errs errorLog
	l := openTest(t, Options{Fsync: FsyncAlways, MaxBytes: 700, MaxFiles: 1, OnError: errs.add}, nil)
	if err := os.MkdirAll(filepath.Join(rotated(l.opts.Path, 1), "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 6)
	if len(errs.list()) == 0 || !strings.Contains(errs.list()[0].Error(), "rotate") {
		t.Fatalf("OnError got %v", errs.list())
	}
	if l.Err() != nil {
		t.Fatalf("Err %v: every record was written", l.Err())
	}
	l.Close()
	if rep := mustVerify(t, l.opts.Path); rep.Records != 6 || rep.MidChain {
		t.Fatalf("%+v", rep)
	}
}

// TestFsyncFailedAtRotationToldOncePerRecord: a rotation whose flush of
// the old file fails costs the records waiting for that flush, and each
// of their Appends tells OnError so; the rotation must not tell the same
// failure once more, or toolgate_audit_write_errors_total counts a loss
// that did not happen. A writes its record and waits to commit (the test
// holds the commit lock); B's record rotates the file, whose fsync fails.
func TestFsyncFailedAtRotationToldOncePerRecord(t *testing.T) {
	fs := newFakeFS()
	fs.wrote = make(chan struct{})
	var errs errorLog
	l := openTest(t, Options{Fsync: FsyncAlways, MaxBytes: 1, OnError: errs.add}, fs)
	fs.set(func(fs *fakeFS) { fs.syncErr = syscall.EIO })
	l.syncMu.Lock()
	results := make(chan error, 2)
	go func() { results <- l.Append(rec(1)) }()
	<-fs.wrote // A's line is in the file; its batch waits for a commit
	go func() { results <- l.Append(rec(2)) }()
	<-fs.wrote // B's line is in the new file: the rotation, and its fsync, are done
	if fs.syncs.Load() != 1 {
		t.Fatalf("%d fsyncs before any commit, want the rotation's one", fs.syncs.Load())
	}
	l.syncMu.Unlock()
	for range 2 {
		if err := <-results; !errors.Is(err, syscall.EIO) {
			t.Errorf("Append: %v, want the failed fsync", err)
		}
	}
	if got := errs.list(); len(got) != 2 {
		t.Errorf("OnError told %d times, want once per record lost (2): %v", len(got), got)
	}
}

// TestFsyncFailedAtCloseToldOncePerRecord: the same for Close, which
// returns the failure to its caller but leaves telling it to the Append
// whose record it cost.
func TestFsyncFailedAtCloseToldOncePerRecord(t *testing.T) {
	fs := newFakeFS()
	fs.wrote = make(chan struct{})
	var errs errorLog
	l := openTest(t, Options{Fsync: FsyncAlways, OnError: errs.add}, fs)
	fs.set(func(fs *fakeFS) { fs.syncErr = syscall.EIO })
	l.syncMu.Lock()
	result := make(chan error, 1)
	go func() { result <- l.Append(rec(1)) }()
	<-fs.wrote
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Close: %v, want the failed fsync", err)
	}
	l.syncMu.Unlock()
	if err := <-result; !errors.Is(err, syscall.EIO) {
		t.Errorf("Append: %v, want the failed fsync", err)
	}
	if got := errs.list(); len(got) != 1 {
		t.Errorf("OnError told %d times, want once (the record lost): %v", len(got), got)
	}
}
