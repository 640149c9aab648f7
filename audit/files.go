package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/toolgate/toolgate/internal/statefile"
)

// rotated is the name of the n-th older file of the trail at path.
func rotated(path string, n int) string { return path + "." + strconv.Itoa(n) }

// chainHead is the seq and hash of the last record of the trail at path:
// from path, or from path.1 when path is missing or empty (a crash between
// rotation's rename and the first write to the new file). No record at all
// starts a new chain: seq 0, ZeroHash.
func chainHead(path string) (seq uint64, prev string, err error) {
	for _, p := range []string{path, rotated(path, 1)} {
		last, _, err := lastLine(p)
		if err != nil {
			return 0, "", err
		}
		if last != nil {
			seq, _, _ = parseHead(last) // lastLine has checked it
			return seq, hashLine(last), nil
		}
	}
	return 0, ZeroHash, nil
}

// openCurrent opens Path for appending. A non-empty file must end with the
// last record this Log knows of: anything else (a partial line, another
// writer's records) would fork the chain, so it is an error, not repaired.
func (l *Log) openCurrent() error {
	last, _, err := lastLine(l.opts.Path)
	if err != nil {
		return err
	}
	if last != nil && hashLine(last) != l.prev && l.broken != nil {
		// The failed write ended on a line boundary: whole lines of
		// records that were reported unwritten.
		return fmt.Errorf("audit: %s: a failed write could not be truncated away (%w), so the file ends with records "+
			"that were reported unwritten (after seq %d); not continuing the chain there. Cut them off with "+
			"`truncate -s %d %s` and start again", l.opts.Path, l.broken, l.seq, l.size, l.opts.Path)
	}
	if last != nil && hashLine(last) != l.prev {
		return fmt.Errorf("audit: %s: its last line is not the last record written (seq %d); "+
			"another process wrote to it, or it was swapped for another file; not continuing the chain there", l.opts.Path, l.seq)
	}
	f, err := l.hooks.open(l.opts.Path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	id, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	if id.Size() == 0 && l.opts.Fsync != FsyncNever {
		// A new file: its directory entry must survive a crash as well.
		if err := statefile.SyncDir(filepath.Dir(l.opts.Path)); err != nil {
			f.Close()
			return fmt.Errorf("audit: %w", err)
		}
	}
	l.f, l.id, l.size, l.broken = f, id, id.Size(), nil
	return nil
}

// rotate retires the current file and renames it to Path.1, shifting the
// older ones; the next write opens a new Path. The chain carries on in
// memory, so the new file's first prev is the hash of Path.1's last line.
// Called with mu held and no fsync running.
func (l *Log) rotate() error {
	err := l.retireUntold()
	if serr := shift(l.opts.Path, l.opts.MaxFiles, l.opts.Fsync != FsyncNever); serr != nil {
		err = errors.Join(err, fmt.Errorf("audit: rotate %s: %w", l.opts.Path, serr))
	}
	return err
}

// shift renames path.(keep-1) … path.1 one up and path to path.1, deleting
// path.keep and anything older (left over from a larger max_files).
func shift(path string, keep int, durable bool) error {
	for i := keep; ; i++ {
		if err := os.Remove(rotated(path, i)); errors.Is(err, fs.ErrNotExist) {
			break
		} else if err != nil {
			return err
		}
	}
	for i := keep - 1; i >= 1; i-- {
		if err := os.Rename(rotated(path, i), rotated(path, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(path, rotated(path, 1)); err != nil {
		return err
	}
	if durable {
		return statefile.SyncDir(filepath.Dir(path))
	}
	return nil
}

// lastLine returns the last line of the file at path, without its newline,
// after checking that it is a complete audit record; a missing or empty
// file gives nil. It reads from the end, so a large file costs little.
func lastLine(path string) (last []byte, size int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	if size = st.Size(); size == 0 {
		return nil, 0, nil
	}
	for chunk := int64(64 << 10); ; chunk *= 2 {
		start := max(0, size-chunk)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return nil, 0, fmt.Errorf("audit: %w", err)
		}
		complete := buf[len(buf)-1] == '\n'
		end := len(buf)
		if complete {
			end--
		}
		i := bytes.LastIndexByte(buf[:end], '\n')
		if i < 0 && start > 0 {
			continue // the line is longer than chunk
		}
		last, lineStart := buf[i+1:end], start+int64(i)+1
		if !complete {
			return nil, 0, tailError(f, path, lineStart, "is incomplete (no newline): the write of that record did not finish, "+
				"so it was never acknowledged. Cut it off with `truncate -s %d %s` and start again", lineStart, path)
		}
		if _, _, err := parseHead(last); err != nil {
			return nil, 0, tailError(f, path, lineStart, "is not an audit record (%v): toolgate will not chain new records "+
				"to a line nobody can verify. Check the trail with `toolgate audit verify`, keep the file as evidence "+
				"and move it aside", err)
		}
		return last, size, nil
	}
}

// tailError names the file and the line number of the last line, which
// starts at offset lineStart; counting lines reads the whole file, so only
// errors pay for it.
func tailError(f *os.File, path string, lineStart int64, format string, args ...any) error {
	n, err := countLines(io.NewSectionReader(f, 0, lineStart))
	if err != nil {
		return fmt.Errorf("audit: %s: the last line "+format, append([]any{path}, args...)...)
	}
	return fmt.Errorf("audit: %s:%d: the last line "+format, append([]any{path, n + 1}, args...)...)
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
