package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Position is where a record was read: its file and its 1-based line.
type Position struct {
	File string
	Line int
}

func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// ErrStop, returned by a ReadFiles callback, ends the read early without an error.
var ErrStop = errors.New("audit: stop reading")

// maxLine bounds one line when reading: far above any record the gateway writes (arguments are
// capped well below it), so only a file that is not a trail reaches it.
const maxLine = 64 << 20

// ReadFiles calls fn with every record of the given files, in the order given and line by line
// (oldest first, as [Files] lists one trail's files), so a trail of any size is read in constant
// memory. The *Record is reused for the next line: fn must copy what it keeps. Records of kinds
// the reader does not know are passed on like the others (Kind is an open set).
//
// ReadFiles does not check the chain ([Verify] does): it reads what is there, and a gateway may be
// appending to the newest file meanwhile. A line that is not a JSON object is an error naming
// file:line, and so is a last line without its newline in any file but the last one given; in the
// last, it is a record still being written, and is left out. An error from fn stops the read and
// is returned, except [ErrStop], which stops it cleanly.
func ReadFiles(paths []string, fn func(r *Record, at Position) error) error {
	for i, p := range paths {
		if err := readFile(p, i == len(paths)-1, fn); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func readFile(path string, newest bool, fn func(r *Record, at Position) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	var rec Record
	for n := 1; ; n++ {
		ln, err := readLine(r)
		if len(ln) > 0 {
			at := Position{File: path, Line: n}
			if ln[len(ln)-1] != '\n' {
				if newest {
					return nil // being appended right now
				}
				return fmt.Errorf("audit: %s: the last line has no newline (a write that did not finish)", at)
			}
			rec = Record{}
			if jerr := json.Unmarshal(ln, &rec); jerr != nil {
				return fmt.Errorf("audit: %s: not an audit record: %v", at, jerr)
			}
			if ferr := fn(&rec, at); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: %s:%d: %w", path, n, err)
		}
	}
}

// readLine reads one line, newline included, refusing lines over maxLine.
func readLine(r *bufio.Reader) ([]byte, error) {
	ln, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return ln, err
	}
	buf := bytes.Clone(ln)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(buf) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes: not an audit trail", maxLine)
		}
		ln, err = r.ReadSlice('\n')
		buf = append(buf, ln...)
	}
	return buf, err
}

// TrailFiles is every file of every trail of the audit file at path (audit.file): for each trail
// [Trails] finds (the file itself, then its slots), its files oldest first as [Files] lists them.
// Each trail is its own chain; a reader that wants every record reads them all.
func TrailFiles(path string) ([][]string, error) {
	trails, err := Trails(path)
	if err != nil {
		return nil, err
	}
	out := make([][]string, 0, len(trails))
	for _, t := range trails {
		files, err := Files(t)
		if err != nil {
			return nil, err
		}
		if len(files) > 0 {
			out = append(out, files)
		}
	}
	return out, nil
}
