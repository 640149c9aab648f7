package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Report is what Verify found in a trail that checked out (or as far as it
// got, with an error).
type Report struct {
	Files    int    // files read
	Records  int    // lines read
	FirstSeq uint64 // seq of the first record; 0 when there is none
	LastSeq  uint64 // seq of the last record
	// LastHash is the SHA-256 of the last line. The chain cannot show that
	// records were cut off the end; writing LastHash down elsewhere can.
	LastHash string
	// MidChain: the first record is not the chain's first (seq 1). Older
	// files were deleted by rotation, or not given; what is here is
	// checked all the same.
	MidChain bool
}

// String is the one-paragraph summary the CLI prints.
func (r Report) String() string {
	if r.Records == 0 {
		return fmt.Sprintf("no records in %d file(s)", r.Files)
	}
	s := fmt.Sprintf("%d record(s), seq %d..%d, in %d file(s); last line's SHA-256 %s", r.Records, r.FirstSeq, r.LastSeq, r.Files, r.LastHash)
	if r.MidChain {
		s += fmt.Sprintf("\nthe trail starts mid-chain at seq %d: the %d earlier record(s) are in files rotated away or not given; "+
			"everything from seq %d on is consistent", r.FirstSeq, r.FirstSeq-1, r.FirstSeq)
	}
	return s
}

// Problem is one place where the chain does not hold.
type Problem struct {
	File string
	Line int // 1-based
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// TamperError is Verify's error when the files are readable but the chain
// does not hold: a line was edited, deleted, moved or cut short.
type TamperError struct {
	Problems []Problem // in file order; at most maxProblems
	More     bool      // more problems were found than are listed
}

func (e *TamperError) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	if e.More {
		lines = append(lines, fmt.Sprintf("(more problems after the first %d)", maxProblems))
	}
	return strings.Join(lines, "\n")
}

// maxProblems bounds the list: after a few, the trail is known to be bad
// and more lines would bury the first, which matters most.
const maxProblems = 50

// Verify checks the chain through the given files, oldest first (Path.N …
// Path.1, Path), as one trail. It returns a *TamperError when the chain
// does not hold, and another error when a file cannot be read.
func Verify(paths ...string) (Report, error) {
	if len(paths) == 0 {
		return Report{}, errors.New("audit: no files to verify")
	}
	c := &checker{}
	for _, p := range paths {
		if err := c.readFile(p); err != nil {
			return c.rep, err
		}
	}
	c.finish()
	if len(c.probs) > 0 {
		// A line is reported when it is read, a link once the lines after it
		// are: put them back in file order.
		order := make(map[string]int, len(paths))
		for i, p := range paths {
			order[p] = i
		}
		slices.SortStableFunc(c.probs, func(a, b Problem) int {
			return cmp.Or(cmp.Compare(order[a.File], order[b.File]), cmp.Compare(a.Line, b.Line))
		})
		return c.rep, &TamperError{Problems: c.probs, More: c.more}
	}
	return c.rep, nil
}

// entry is one line as the checker sees it.
type entry struct {
	file string
	line int
	seq  uint64
	prev string
	hash string
	bad  bool // not a record (already reported): no link to or from it is checked
}

// checker streams lines through a window of four, the most that telling a
// swapped pair from other damage needs, so a trail of any size fits in
// memory.
type checker struct {
	rep   Report
	win   []entry
	seen  bool // the first record has been checked
	head  bool // the first two lines have been checked for a swap
	probs []Problem
	more  bool
}

func (c *checker) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	c.rep.Files++
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		ln, err := r.ReadBytes('\n')
		if len(ln) > 0 {
			c.rep.Records++
			c.push(path, n, ln)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: %s: %w", path, err)
		}
	}
}

// push checks one line on its own and adds it to the window.
func (c *checker) push(file string, n int, raw []byte) {
	e := entry{file: file, line: n}
	complete := bytes.HasSuffix(raw, []byte("\n"))
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	e.hash = hashLine(raw)
	seq, prev, err := parseHead(raw)
	switch {
	case !complete:
		e.bad = true
		c.problem(e, "truncated: the last line has no newline (a write that did not finish, or a file cut short)")
	case err != nil:
		e.bad = true
		c.problem(e, "not an audit record: %v (the line was edited or damaged)", err)
	default:
		e.seq, e.prev = seq, prev
		c.rep.LastSeq, c.rep.LastHash = seq, e.hash
		if !c.seen {
			c.seen = true
			c.start(e)
		}
	}
	c.win = append(c.win, e)
	if !c.head && len(c.win) >= 3 {
		c.checkHead()
	}
	for len(c.win) >= 4 {
		c.step()
	}
}

// checkHead catches a swap of the first two lines, which step cannot: the
// first line has no line before it to be linked to.
func (c *checker) checkHead() {
	c.head = true
	if len(c.win) < 2 {
		return
	}
	a, b := c.win[0], c.win[1]
	if a.bad || b.bad || !linked(b, a) || len(c.win) > 2 && !c.win[2].bad && !linked(a, c.win[2]) {
		return
	}
	c.problem(a, "lines %d and %d are swapped: seq %d is written before seq %d", a.line, b.line, a.seq, b.seq)
	c.rep.MidChain = false
	c.start(b)
	c.win = c.win[2:] // a→next is linked
}

// start checks the first record of the trail, which has no predecessor to
// be linked to.
func (c *checker) start(e entry) {
	c.rep.FirstSeq = e.seq
	switch {
	case e.seq == 1 && e.prev != ZeroHash:
		c.problem(e, "seq 1 must have prev %s (nothing comes before it), found %s", ZeroHash, e.prev)
	case e.seq > 1 && e.prev == ZeroHash:
		c.problem(e, "prev %s belongs to seq 1 only, found on seq %d", ZeroHash, e.seq)
	case e.seq > 1:
		c.rep.MidChain = true
	}
}

func (c *checker) finish() {
	if !c.head {
		c.checkHead()
	}
	for len(c.win) >= 2 {
		c.step()
	}
}

// step checks the link from win[0] to win[1] and drops what it consumed.
func (c *checker) step() {
	p, a := c.win[0], c.win[1]
	if p.bad || a.bad || linked(p, a) {
		c.win = c.win[1:]
		return
	}
	if c.swapped() {
		b := c.win[2]
		c.problem(a, "lines %d and %d are swapped: seq %d is written before seq %d", a.line, b.line, a.seq, b.seq)
		c.win = c.win[3:] // the links p→a, a→b and b→next are all explained
		return
	}
	c.broken(p, a)
	c.win = c.win[1:]
}

func linked(p, a entry) bool { return a.seq == p.seq+1 && a.prev == p.hash }

// swapped reports whether win[1] and win[2] are the two records after
// win[0] in the wrong order, with nothing else wrong around them.
func (c *checker) swapped() bool {
	if len(c.win) < 3 {
		return false
	}
	p, a, b := c.win[0], c.win[1], c.win[2]
	if b.bad || !linked(p, b) || !linked(b, a) {
		return false
	}
	return len(c.win) < 4 || c.win[3].bad || linked(a, c.win[3])
}

// broken explains a link that does not hold, at the line that is wrong.
func (c *checker) broken(p, a entry) {
	at := ""
	if a.file != p.file {
		at = " in " + a.file
	}
	switch {
	case a.seq == p.seq+1:
		c.problem(p, "edited: this line's SHA-256 is %s, but the next record (line %d%s, seq %d) was chained to %s",
			p.hash, a.line, at, a.seq, a.prev)
	case a.seq == 1 && a.prev == ZeroHash:
		c.problem(a, "a new chain starts here (seq 1) after seq %d: the trail was restarted, or lines before it were replaced", p.seq)
	case a.seq > p.seq+1 && a.prev != p.hash:
		missing := a.seq - p.seq - 1
		c.problem(a, "%d record(s) missing before this line (deleted): seq %d follows seq %d, expected seq %d with prev %s",
			missing, a.seq, p.seq, p.seq+1, p.hash)
	case a.seq > p.seq+1:
		c.problem(a, "seq %d, expected %d: the seq was edited (prev does match the line before)", a.seq, p.seq+1)
	default:
		c.problem(a, "seq %d, expected %d: out of order (a line moved or duplicated)", a.seq, p.seq+1)
	}
}

func (c *checker) problem(e entry, format string, args ...any) {
	if len(c.probs) == maxProblems {
		c.more = true
		return
	}
	c.probs = append(c.probs, Problem{File: e.file, Line: e.line, Msg: fmt.Sprintf(format, args...)})
}
