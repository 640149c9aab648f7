package upstreams

import (
	"io"
	"net/http"
	"sync"
)

// answerSniff is how much of a POST's body isAnswer reads: mcp-go writes
// a message's jsonrpc and id before its result, error or method, and an
// id longer than this leaves an answer taken for a request (sent with its
// caller's cancellation, as mcp-go means it).
const answerSniff = 256

// isAnswer reports whether req is a POST that carries a JSON-RPC response
// (a top-level result or error, not after a method): mcp-go's answer to
// the upstream's own request. It reads a copy of the start of the body
// (GetBody, which mcp-go's in-memory bodies have), never the body itself.
func isAnswer(req *http.Request) bool {
	if req.Method != http.MethodPost || req.GetBody == nil || req.ContentLength <= 0 {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	buf := sniffBufs.Get().(*[answerSniff]byte)
	defer sniffBufs.Put(buf)
	n, _ := io.ReadFull(body, buf[:])
	return answerPrefix(buf[:n])
}

// sniffBufs keeps isAnswer from allocating its buffer on every POST (the
// body's reader would make it escape).
var sniffBufs = sync.Pool{New: func() any { return new([answerSniff]byte) }}

// answerPrefix reports whether b, the start of a JSON object, names a
// top-level result or error before any method. It reads the members in
// order while their values are scalars (jsonrpc, id); anything else
// before it can tell (a nested value, an escaped key, the end of b) is
// not an answer.
func answerPrefix(b []byte) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	for i++; ; i++ {
		key, next, ok := member(b, i)
		if !ok {
			return false
		}
		switch string(key) { // compared without a copy
		case "result", "error":
			return true
		case "method":
			return false
		}
		if i = skipScalar(b, next); i >= len(b) || b[i] != ',' {
			return false
		}
	}
}

// member reads the key of the member at b[i:] and its colon, and returns
// where its value starts.
func member(b []byte, i int) (key []byte, value int, ok bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	start := i + 1
	for i = start; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' {
			return nil, 0, false
		}
	}
	if i >= len(b) {
		return nil, 0, false
	}
	key = b[start:i]
	i = skipSpace(b, i+1)
	if i >= len(b) || b[i] != ':' {
		return nil, 0, false
	}
	return key, skipSpace(b, i+1), true
}

// skipScalar skips the string, number or literal at b[i:] and the space
// after it, returning len(b) for anything else.
func skipScalar(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '{', '[':
		return len(b)
	case '"':
		for i++; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return skipSpace(b, i+1)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && !isSpace(b[i]) {
		i++
	}
	return skipSpace(b, i)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
