package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadFiles streams every record of a rotated trail and of its slots, in order, with the file and
// line of each, arguments included when the Log wrote them.
func TestReadFilesAcrossRotationAndSlots(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := openTest(t, Options{Path: path, Fsync: FsyncNever, MaxBytes: 600, IncludeArgs: true}, nil)
	appendN(t, l, 1, 10)
	// A second process's trail: slot 2.
	l2 := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	if l2.Path() != SlotPath(path, 2) {
		t.Fatalf("second log at %s", l2.Path())
	}
	appendN(t, l2, 100, 3)
	l.Close()
	l2.Close()

	trails, err := TrailFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(trails) != 2 || len(trails[0]) < 2 || len(trails[1]) != 1 {
		t.Fatalf("trails %v: want the rotated trail and slot 2", trails)
	}
	var seqs []uint64
	var last Position
	for i, files := range trails {
		err := ReadFiles(files, func(r *Record, at Position) error {
			seqs = append(seqs, r.Seq)
			last = at
			var args struct {
				OrderID int `json:"order_id"`
			}
			if i == 0 { // the first Log kept the arguments
				if json.Unmarshal(r.Args, &args) != nil || args.OrderID != int(r.Seq) || r.ArgsDigest != Digest(r.Args) {
					t.Errorf("%s: args %s digest %s", at, r.Args, r.ArgsDigest)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seqs) != 13 || seqs[0] != 1 || seqs[9] != 10 || seqs[10] != 1 || last.File != SlotPath(path, 2) || last.Line != 3 {
		t.Fatalf("seqs %v, last %s", seqs, last)
	}
}

// A line that is not a record is an error naming file:line; ErrStop ends the read cleanly.
func TestReadFilesErrors(t *testing.T) {
	path := writeTrail(t, 3)
	n := 0
	if err := ReadFiles([]string{path}, func(*Record, Position) error { n++; return ErrStop }); err != nil || n != 1 {
		t.Fatalf("ErrStop: %v after %d records", err, n)
	}
	lines := readLines(t, path)
	writeLines(t, path, []string{lines[0], "not json", lines[2]})
	err := ReadFiles([]string{path}, func(*Record, Position) error { return nil })
	if err == nil || !strings.Contains(err.Error(), path+":2: not an audit record") {
		t.Fatalf("error %v", err)
	}
	// A last line without its newline: in the newest file, a record being appended, left out;
	// in an older one, a file cut short.
	if err := os.WriteFile(path, []byte(lines[0]+strings.TrimSuffix(lines[1], "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	n = 0
	if err := ReadFiles([]string{path}, func(*Record, Position) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("a record being appended: %v, %d records", err, n)
	}
	newer := writeTrail(t, 1)
	if err := ReadFiles([]string{path, newer}, func(*Record, Position) error { return nil }); err == nil || !strings.Contains(err.Error(), path+":2: the last line has no newline") {
		t.Fatalf("truncated older file: %v", err)
	}
}
