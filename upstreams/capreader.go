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
// Messages are framed by '\n' (stdio lines, SSE lines) or by EOF (a whole
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
	lines      bool // frame by '\n'; otherwise the whole stream is one message
	onOversize func(id []byte)

	out bytes.Buffer // bytes ready for the consumer
	buf []byte       // read buffer in whole-stream mode
	eof bool
}

// oversizeCode is the JSON-RPC error code of the stand-in message.
const oversizeCode = -32090

func newCapReader(src io.Reader, max int, lines bool, onOversize func(id []byte)) *capReader {
	return &capReader{src: bufio.NewReaderSize(src, 32<<10), max: max, lines: lines, onOversize: onOversize}
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
		chunk, err := r.readChunk()
		msg = append(msg, chunk...)
		if len(msg) > r.max {
			return r.replaceOversize(msg, endsLine(chunk) && r.lines, err)
		}
		if err != nil {
			r.out.Write(msg)
			r.eof = true
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if r.lines && endsLine(chunk) {
			r.out.Write(msg)
			return nil
		}
	}
}

func endsLine(b []byte) bool { return len(b) > 0 && b[len(b)-1] == '\n' }

// readChunk returns the next piece of the current message: up to and
// including '\n' in line mode, or whatever is buffered otherwise. The slice
// is only valid until the next call.
func (r *capReader) readChunk() ([]byte, error) {
	if r.lines {
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
// stand-in error in its place. complete says head already holds the whole
// message; readErr is the error that came with head's last chunk.
func (r *capReader) replaceOversize(head []byte, complete bool, readErr error) error {
	prefix, body := splitSSEData(head)
	sc := idScanner{}
	sc.feed(body)
	for !complete && readErr == nil {
		var chunk []byte
		chunk, readErr = r.readChunk()
		sc.feed(chunk)
		complete = r.lines && endsLine(chunk)
	}
	if readErr != nil {
		r.eof = true
		if !errors.Is(readErr, io.EOF) {
			return readErr
		}
	}
	id := sc.id()
	if id == nil {
		return nil // nothing is waiting on a notification: drop it
	}
	if r.onOversize != nil {
		r.onOversize(id)
	}
	fmt.Fprintf(&r.out, `%s{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"message over %d bytes"}}`,
		prefix, id, oversizeCode, r.max)
	if r.lines {
		r.out.WriteByte('\n')
	}
	return nil
}

// splitSSEData separates an SSE "data:" field name from its JSON payload.
func splitSSEData(line []byte) (prefix string, body []byte) {
	if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		return "data: ", rest
	}
	return "", line
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
