package audit

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// Recent lines: the console's live calls page (console/) shows the last calls with their audit
// records, and reading them back from the trail on every page view would read a file of up to
// MaxBytes from its end each time. So a Log with Options.KeepRecent keeps the last lines it wrote in
// memory, exactly as written (arguments only when IncludeArgs, redacted as in the file), bounded
// both by count and by bytes: a call's line is 300 to 500 bytes without arguments, so the console's
// 1,000 lines hold about 0.5 MB; with arguments the byte bound (KeepRecentBytes) decides.
// At Open the lines are seeded from the end of the current file, so a restart does not empty the
// page. They are a view of what this process wrote, not a source of truth: Verify reads the files.

// DefaultKeepRecentBytes bounds the lines kept when Options.KeepRecentBytes is zero.
const DefaultKeepRecentBytes = 4 << 20

// recentLines is a ring of the last lines written. Each slot copies its line into a buffer of its
// own and keeps that buffer for the line that takes the slot next, when it is small (reusedLine):
// a kept line then costs no allocation (before, each record's line was copied out of the buffer its
// write was made in, 1-2% of a call's allocated bytes). So newest copies what it returns.
type recentLines struct {
	mu       sync.Mutex
	lines    [][]byte // ring; the oldest at head
	head     int
	n        int
	size     int // bytes held
	maxBytes int
}

func newRecentLines(count, maxBytes int) *recentLines {
	if count <= 0 {
		return nil
	}
	return &recentLines{lines: make([][]byte, count), maxBytes: maxBytes}
}

// add keeps ln (one line without its newline), dropping the oldest lines past the bounds. A line
// larger than the byte bound is not kept at all.
func (r *recentLines) add(ln []byte) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(ln) > r.maxBytes {
		return
	}
	for r.n > 0 && (r.n == len(r.lines) || r.size+len(ln) > r.maxBytes) {
		old := r.lines[r.head]
		r.size -= len(old)
		r.lines[r.head] = old[:0]
		if cap(old) > reusedLine {
			r.lines[r.head] = nil
		}
		r.head = (r.head + 1) % len(r.lines)
		r.n--
	}
	i := (r.head + r.n) % len(r.lines)
	r.lines[i] = append(r.lines[i][:0], ln...)
	r.n++
	r.size += len(ln)
}

// reusedLine: a slot keeps a buffer up to this size for the next line. A call's line is 300 to
// 500 bytes without arguments; the empty buffers the byte bound leaves behind hold at most
// KeepRecent times this (1,000 lines: 1 MiB) beside the lines themselves.
const reusedLine = 1 << 10

// newest returns copies of up to max of the lines kept, newest first (max <= 0: all).
func (r *recentLines) newest(max int) [][]byte {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if max <= 0 || max > r.n {
		max = r.n
	}
	out := make([][]byte, 0, max)
	for i := r.n - 1; i >= r.n-max; i-- {
		out = append(out, bytes.Clone(r.lines[(r.head+i)%len(r.lines)]))
	}
	return out
}

// seed fills the ring from the end of path: the whole lines among its last maxBytes bytes, oldest
// first. A file that cannot be read seeds nothing: the lines are a convenience, and Open has already
// checked the file's last line.
func (r *recentLines) seed(path string) {
	if r == nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return
	}
	from := max(0, st.Size()-int64(r.maxBytes))
	buf := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return
	}
	if from > 0 { // the first line is cut: start after its end
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return
		}
		buf = buf[i+1:]
	}
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return // a line being written: Open refuses such a file anyway
		}
		r.add(buf[:i])
		buf = buf[i+1:]
	}
}

// Recent returns up to max of the last lines this Log wrote (and those it found at the end of its
// file at Open), newest first, each exactly as written without its newline; nil unless
// Options.KeepRecent is set. The slices are the caller's. Records of every kind are there.
func (l *Log) Recent(max int) [][]byte { return l.recent.newest(max) }
