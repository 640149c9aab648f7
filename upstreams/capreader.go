package upstreams

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
)

// capReader bounds every message an upstream sends while it is being read,
// so a hostile or broken upstream can never make the gateway hold more than
// max bytes of one message in memory.
//
// Messages are framed by '\n' (stdio), by a blank line (an SSE event, whose
// data: lines the client joins into one message), or by EOF (a whole
// application/json HTTP body). A message within the cap passes through
// unchanged. An oversize message is not forwarded: the reader streams
// through the rest of it, keeping only the top-level JSON-RPC "id", and emits
// in its place a JSON-RPC error for that id, so the waiting call ends at
// once instead of hanging. When the id comes before the cap is passed (as
// mcp-go writes it), the stand-in is emitted as soon as the cap is passed,
// before the rest is streamed past; when it comes last, at the message's
// end. The id is also reported through onOversize; the connection uses that
// (not the error code, which an upstream could forge) to answer
// result_too_large. An oversize message without an id is dropped.
//
// A message that goes on past discardLimit is taken as endless: the reader
// fails with errEndless, which ends the connection (nothing behind such a
// message could ever be read).
type capReader struct {
	src        *bufio.Reader
	max        int
	framing    framing
	onOversize func(id []byte)

	out       msgBuffer // bytes ready for the consumer
	buf       []byte    // read buffer in whole-stream mode
	lineStart bool      // the next chunk starts a line (line and event framing)
	eof       bool
	err       error // sticky failure

	// While an oversize message is streamed past:
	skipping bool
	skip     *feed // scans for the id until the stand-in is out
	emitted  bool  // the stand-in for this message is out
	skipped  int64 // bytes of this message so far
}

// errEndless: a message went on past discardLimit.
var errEndless = errors.New("upstream message without end: gave up reading it")

// discardLimit is how far an oversize message is streamed past before the
// stream is given up as endless.
func (r *capReader) discardLimit() int64 {
	if int64(r.max) > math.MaxInt64/16 {
		return math.MaxInt64 // no cap (a Server without MaxResultBytes)
	}
	return max(16*int64(r.max), 16<<20)
}

type framing int

const (
	frameLine  framing = iota // one message per line: stdio
	frameEvent                // one message per SSE event, ended by a blank line
	frameWhole                // the whole stream is one message: a JSON body
)

// oversizeCode is the JSON-RPC error code of the stand-in message.
const oversizeCode = -32090

func newCapReader(src io.Reader, max int, f framing, onOversize func(id []byte)) *capReader {
	return &capReader{src: bufio.NewReaderSize(src, 32<<10), max: max, framing: f, onOversize: onOversize, lineStart: true,
		out: msgBuffer{limit: max}}
}

func (r *capReader) Read(p []byte) (int, error) {
	for r.out.Len() == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.eof {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			r.err = err
			return 0, err
		}
	}
	return r.out.Read(p), nil
}

// maxKeptMessage is the most room out keeps between messages: a 5 MiB
// result would otherwise stay allocated for the connection's life.
const maxKeptMessage = 1 << 20

// msgBuffer holds the bytes of the message being read, read from the front.
// It grows by doubling (appendDoubling) and, once read, keeps its room only
// up to maxKeptMessage.
type msgBuffer struct {
	b     []byte
	off   int
	limit int // the most room doubling gives it (the cap; a message that needs more is refused)
}

func (m *msgBuffer) Len() int      { return len(m.b) - m.off }
func (m *msgBuffer) Bytes() []byte { return m.b[m.off:] }

func (m *msgBuffer) Write(p []byte) (int, error) {
	m.b = appendDoubling(m.b, p, m.limit)
	return len(p), nil
}

func (m *msgBuffer) Read(p []byte) int {
	n := copy(p, m.b[m.off:])
	m.off += n
	if m.off == len(m.b) {
		m.Reset()
	}
	return n
}

func (m *msgBuffer) Reset() {
	m.off = 0
	if cap(m.b) > maxKeptMessage {
		m.b = nil // a large message was read: do not keep its room
		return
	}
	m.b = m.b[:0]
}

// appendDoubling is append(dst, src...) that doubles dst's room when it
// must grow, up to limit when it is positive (more only if src needs it).
// append grows a large slice by about a quarter at a time: gathering a
// 5 MiB line that way allocated 25 MB; doubling, 10.
func appendDoubling(dst, src []byte, limit int) []byte {
	if need := len(dst) + len(src); need > cap(dst) {
		room := max(2*cap(dst), 4<<10)
		if limit > 0 {
			room = min(room, limit)
		}
		grown := make([]byte, len(dst), max(need, room))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}

// fill reads one message (or what remains of the stream) into out, which
// is empty when it starts: a message is written there as it is read, once,
// rather than gathered first and copied (for a 5 MiB result that was 10 MB
// of garbage from the gathering buffer's growth).
func (r *capReader) fill() error {
	if r.skipping {
		return r.skipRest()
	}
	for {
		startsLine := r.lineStart
		chunk, err := r.readChunk()
		done := r.ends(chunk, startsLine)
		if r.out.Len()+len(chunk) > r.max { // not written: out holds at most max
			return r.replaceOversize(r.out.Bytes(), chunk, done, err)
		}
		r.out.Write(chunk)
		if err != nil {
			r.eof = true
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if done {
			return nil
		}
	}
}

// ends reports whether chunk completes the current message, and tracks
// where lines start.
func (r *capReader) ends(chunk []byte, startsLine bool) bool {
	if r.framing == frameWhole {
		return false
	}
	r.lineStart = endsLine(chunk)
	if r.framing == frameLine {
		return r.lineStart
	}
	return startsLine && isBlankLine(chunk)
}

func endsLine(b []byte) bool { return len(b) > 0 && b[len(b)-1] == '\n' }

func isBlankLine(b []byte) bool { return string(b) == "\n" || string(b) == "\r\n" }

// readChunk returns the next piece of the current message: up to and
// including '\n' when framing by lines or events, or whatever is buffered
// otherwise. The slice is only valid until the next call.
func (r *capReader) readChunk() ([]byte, error) {
	if r.framing != frameWhole {
		chunk, err := r.src.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
		return chunk, err
	}
	if r.buf == nil {
		r.buf = make([]byte, 32<<10)
	}
	n, err := r.src.Read(r.buf)
	return r.buf[:n], err
}

// replaceOversize starts streaming past an oversize message: head (out's
// bytes) and then last are what was read of it, done says they hold the
// whole message, and readErr is the error that came with last. The id
// scanner copies what it keeps, so out is emptied once they are fed, before
// the stand-in is written there.
func (r *capReader) replaceOversize(head, last []byte, done bool, readErr error) error {
	r.skipping, r.skip, r.emitted, r.skipped = true, r.newFeed(), false, int64(len(head)+len(last))
	for _, part := range [][]byte{head, last} {
		for _, line := range bytes.SplitAfter(part, []byte("\n")) {
			if len(line) > 0 { // (SplitAfter ends with an empty piece after a '\n': not a chunk)
				r.skip.feed(line)
			}
		}
	}
	r.out.Reset()
	if done || readErr != nil {
		return r.endSkip(readErr)
	}
	if r.emitEarly() {
		return nil
	}
	return r.skipRest()
}

// skipRest streams past the rest of an oversize message. It returns early,
// with the stand-in queued, once the id is known; the next fill goes on.
func (r *capReader) skipRest() error {
	for {
		startsLine := r.lineStart
		chunk, err := r.readChunk()
		if !r.emitted {
			r.skip.feed(chunk)
		}
		r.skipped += int64(len(chunk))
		done := r.ends(chunk, startsLine)
		if done || err != nil {
			return r.endSkip(err)
		}
		if r.skipped > r.discardLimit() {
			r.skipping = false
			return errEndless
		}
		if r.emitEarly() {
			return nil
		}
	}
}

// emitEarly queues the stand-in as soon as the message's id is known.
func (r *capReader) emitEarly() bool {
	if r.emitted || !r.skip.sc.captured {
		return false
	}
	r.emitted = true // a message whose id is not a plain scalar gets none
	if id := r.skip.sc.id(); id != nil {
		r.standIn(id)
		return true
	}
	return false
}

// endSkip finishes an oversize message: the stand-in, unless it is out
// already, then the stream's end if it came with the message.
func (r *capReader) endSkip(readErr error) error {
	r.skipping = false
	if !r.emitted {
		r.emitted = true
		if id := r.skip.sc.id(); id != nil {
			r.standIn(id)
		}
	}
	r.skip = nil
	if readErr != nil {
		r.eof = true
		if !errors.Is(readErr, io.EOF) {
			return readErr
		}
	}
	return nil
}

func (r *capReader) standIn(id []byte) {
	if r.onOversize != nil {
		r.onOversize(id)
	}
	r.writeStandIn(id)
}

func (r *capReader) writeStandIn(id []byte) {
	prefix, end := "", ""
	switch r.framing {
	case frameLine:
		end = "\n"
	case frameEvent:
		prefix, end = "data: ", "\n\n"
	}
	fmt.Fprintf(&r.out, `%s{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"message over %d bytes"}}%s`,
		prefix, id, oversizeCode, r.max, end)
}

// feed hands the JSON of a message to the id scanner: for an SSE event only
// the payload of its data: lines, which the client would join.
type feed struct {
	sc        idScanner
	event     bool
	lineStart bool
	inData    bool
}

func (r *capReader) newFeed() *feed { return &feed{event: r.framing == frameEvent, lineStart: true} }

func (f *feed) feed(chunk []byte) {
	if !f.event {
		f.sc.feed(chunk)
		return
	}
	startsLine := f.lineStart
	f.lineStart = endsLine(chunk)
	if startsLine {
		rest, isData := bytes.CutPrefix(chunk, []byte("data:"))
		f.inData = isData
		chunk = bytes.TrimPrefix(rest, []byte(" "))
	}
	if f.inData {
		f.sc.feed(chunk)
	}
}

// idScanner walks JSON incrementally, holding only the value of the
// top-level "id" member, never the rest of the message.
type idScanner struct {
	depth    int
	inString bool
	escaped  bool
	key      []byte // current top-level key, while reading it (capped)
	inKey    bool
	afterKey bool // between a top-level key and its value
	capture  bool // reading the value of "id"
	captured bool // the value of "id" is complete
	value    []byte
	done     bool // the top-level object closed
}

const maxIDBytes = 128

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		if s.done {
			return
		}
		s.step(c)
	}
}

func (s *idScanner) step(c byte) {
	if s.capture {
		s.captureByte(c)
	}
	if s.inString {
		s.stringByte(c)
		return
	}
	switch c {
	case '"':
		s.inString = true
		s.inKey = s.depth == 1 && !s.afterKey
		if s.inKey {
			s.key = s.key[:0]
		}
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
		if s.depth == 0 {
			s.done = true
		}
	case ':':
		if s.depth == 1 {
			s.afterKey = true
			if string(s.key) == "id" {
				s.capture = true
				s.value = s.value[:0]
			}
		}
	case ',':
		if s.depth == 1 {
			s.afterKey = false
		}
	}
}

func (s *idScanner) stringByte(c byte) {
	switch {
	case s.escaped:
		s.escaped = false
	case c == '\\':
		s.escaped = true
	case c == '"':
		s.inString = false
		return
	}
	if s.inKey && len(s.key) < 8 {
		s.key = append(s.key, c)
	}
}

// captureByte records a byte of the id value until the value ends.
func (s *idScanner) captureByte(c byte) {
	ends := !s.inString && s.depth == 1 && (c == ',' || c == '}')
	if ends {
		s.capture = false
		s.captured = true
		return
	}
	if len(s.value) < maxIDBytes {
		s.value = append(s.value, c)
	}
}

// id returns the id as JSON (a number or a quoted string), or nil when the
// message had none or it was not a plain scalar.
func (s *idScanner) id() []byte {
	v := bytes.TrimSpace(s.value)
	if len(v) == 0 || len(v) >= maxIDBytes {
		return nil
	}
	if v[0] == '"' {
		if len(v) < 2 || v[len(v)-1] != '"' || bytes.ContainsAny(v[1:len(v)-1], "\"\\\n") {
			return nil
		}
		return v
	}
	for _, c := range v {
		if (c < '0' || c > '9') && c != '-' {
			return nil
		}
	}
	return v
}
