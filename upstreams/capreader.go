package upstreams

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
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
// once instead of hanging. The id is also reported through onOversize; the
// connection uses that (not the error code, which an upstream could forge) to
// answer result_too_large. An oversize message without an id is dropped.
type capReader struct {
	src        *bufio.Reader
	max        int
	framing    framing
	onOversize func(id []byte)

	out       bytes.Buffer // bytes ready for the consumer
	buf       []byte       // read buffer in whole-stream mode
	lineStart bool         // the next chunk starts a line (line and event framing)
	eof       bool
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
	return &capReader{src: bufio.NewReaderSize(src, 32<<10), max: max, framing: f, onOversize: onOversize, lineStart: true}
}

func (r *capReader) Read(p []byte) (int, error) {
	for r.out.Len() == 0 {
		if r.eof {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	return r.out.Read(p)
}

// fill reads one message (or what remains of the stream) into out.
func (r *capReader) fill() error {
	var msg []byte
	for {
		startsLine := r.lineStart
		chunk, err := r.readChunk()
		msg = append(msg, chunk...)
		done := r.ends(chunk, startsLine)
		if len(msg) > r.max {
			return r.replaceOversize(msg, done, err)
		}
		if err != nil {
			r.out.Write(msg)
			r.eof = true
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if done {
			r.out.Write(msg)
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

// replaceOversize discards the rest of an oversize message and queues the
// stand-in error in its place. done says head already holds the whole
// message; readErr is the error that came with head's last chunk.
func (r *capReader) replaceOversize(head []byte, done bool, readErr error) error {
	f := r.newFeed()
	for _, line := range bytes.SplitAfter(head, []byte("\n")) {
		f.feed(line)
	}
	for !done && readErr == nil {
		startsLine := r.lineStart
		var chunk []byte
		chunk, readErr = r.readChunk()
		f.feed(chunk)
		done = r.ends(chunk, startsLine)
	}
	if readErr != nil {
		r.eof = true
		if !errors.Is(readErr, io.EOF) {
			return readErr
		}
	}
	id := f.sc.id()
	if id == nil {
		return nil // nothing is waiting on a notification: drop it
	}
	if r.onOversize != nil {
		r.onOversize(id)
	}
	r.writeStandIn(id)
	return nil
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
