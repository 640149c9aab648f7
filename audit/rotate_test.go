package audit

import (
	"os"
	"path/filepath"
	"strings"
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
