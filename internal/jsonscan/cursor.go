// Package jsonscan reads the few JSON shapes the gateway decodes on its hot
// paths without encoding/json: a client's tools/call request (proxy's fast
// path), an upstream's answer line (upstreams' line transport), and a tool
// result and its text blocks (the pipeline's normalize link).
//
// Every decoder here is a shortcut, never a second opinion: it reports
// false for anything it is not sure of (a member it does not know, a
// repeated one, an escape or a non-ASCII byte in a key, invalid JSON), and
// its caller then decodes with encoding/json as before. Where it reports
// true, its result is the one encoding/json gives; each decoder has a table
// and a fuzz target (internal/testkit.Shortcut) holding it to that.
//
// encoding/json took about 5 µs and 14 allocations for a 110-byte request
// (its scanner, its state and reflection), and about as much again for
// each answer and result: the shortcuts allocate only what they return.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Cursor reads JSON from a byte slice, left to right. Its methods report
// failure rather than errors: the caller falls back to encoding/json.
// Values it returns are slices of the input, not copies, except the
// decoded strings of Text.
type Cursor struct {
	b      []byte
	i      int
	failed bool // something was not an object where one was required
	big    bool // Value met a number a float64 cannot hold (see BigNumber)
}

// NewCursor starts a cursor at the beginning of b.
func NewCursor(b []byte) Cursor { return Cursor{b: b} }

// IsSpace reports JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Space skips whitespace.
func (c *Cursor) Space() {
	for c.i < len(c.b) && IsSpace(c.b[c.i]) {
		c.i++
	}
}

// Next skips whitespace and reports whether the next byte is x, taking it.
func (c *Cursor) Next(x byte) bool {
	c.Space()
	if c.i < len(c.b) && c.b[c.i] == x {
		c.i++
		return true
	}
	return false
}

// Open reads the { of an object and reports whether a member follows
// (false for {}, and for anything but an object, which marks the cursor
// failed).
func (c *Cursor) Open() bool {
	if !c.Next('{') {
		c.failed = true
		return false
	}
	return !c.Next('}')
}

// Failed reports whether Open met something that was not an object.
func (c *Cursor) Failed() bool { return c.failed }

// AtEnd skips trailing whitespace and reports whether the input is used up
// and nothing failed.
func (c *Cursor) AtEnd() bool {
	c.Space()
	return !c.failed && c.i == len(c.b)
}

// Key reads a member's key and its colon, leaving the cursor on the value.
// The key is a plain string (see PlainString), in the input.
func (c *Cursor) Key() ([]byte, bool) {
	c.Space()
	k, ok := c.PlainString()
	if !ok || !c.Next(':') {
		return nil, false
	}
	c.Space()
	return k, true
}

// Member reads a member's key, which must be one of names and not in
// *seen, and returns its bit (1 << its index in names), added to *seen; 0
// for any other key, a repeated one, or no key. encoding/json matches
// keys without regard to case and takes the last of repeated members:
// refusing both keeps a shortcut's answer its answer.
func (c *Cursor) Member(seen *int, names ...string) int {
	key, ok := c.Key()
	if !ok {
		return 0
	}
	bit := MemberBit(key, names...)
	if bit == 0 || *seen&bit != 0 {
		return 0
	}
	*seen |= bit
	return bit
}

// MemberBit is 1 << the index of key among names, or 0.
func MemberBit(key []byte, names ...string) int {
	for i, n := range names {
		if string(key) == n {
			return 1 << i
		}
	}
	return 0
}

// After reads what follows a member's value: a comma (more members) or the
// closing brace. ok is whether the value was read.
func (c *Cursor) After(ok bool) (more, fine bool) {
	switch {
	case !ok:
		return false, false
	case c.Next('}'):
		return false, true
	case c.Next(','):
		return true, true
	}
	return false, false
}

// Literal reads a plain string and reports whether it is want (whose
// bytes are printable ASCII without quote or backslash).
func (c *Cursor) Literal(want string) bool {
	s, ok := c.PlainString()
	return ok && string(s) == want
}

// KnownString reads a plain string into *dst: the constant usual when it
// is that (no allocation), a copy otherwise. An empty string is refused
// unless usual is empty too.
func (c *Cursor) KnownString(dst *string, usual string) bool {
	b, ok := c.PlainString()
	switch {
	case !ok || (len(b) == 0 && usual != ""):
		return false
	case string(b) == usual:
		*dst = usual
	default:
		*dst = string(b)
	}
	return true
}

// PlainString reads a string of printable ASCII without escapes (the
// strings encoding/json decodes to their very bytes) and returns its
// bytes, in the input, without the quotes.
func (c *Cursor) PlainString() ([]byte, bool) {
	n := plainStringLen(c.b[c.i:])
	if n == 0 {
		return nil, false
	}
	s := c.b[c.i+1 : c.i+n-1]
	c.i += n
	return s, true
}

// plainStringLen is the length, quotes included, of the plain string at
// the start of b; 0 when b does not start with one.
func plainStringLen(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return 0
	}
	for i := 1; i < len(b); i++ {
		switch ch := b[i]; {
		case ch == '"':
			return i + 1
		case ch < 0x20 || ch >= 0x7f || ch == '\\':
			return 0
		}
	}
	return 0
}

// PlainIDLen is the length of the JSON-RPC id at the start of b when it is
// a plain string (quotes included) or digits without a leading zero; 0 for
// anything else.
func PlainIDLen(b []byte) int {
	if len(b) > 0 && b[0] == '"' {
		return plainStringLen(b)
	}
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n > 1 && b[0] == '0' {
		return 0
	}
	return n
}

// PlainID reads an id PlainIDLen accepts and returns its JSON, in the
// input; nil for anything else.
func (c *Cursor) PlainID() []byte {
	n := PlainIDLen(c.b[c.i:])
	if n == 0 {
		return nil
	}
	c.i += n
	return c.b[c.i-n : c.i]
}

// TextString reads a string without escapes or control characters whose
// bytes are valid UTF-8 (encoding/json decodes it to those very bytes) and
// returns its bytes, in the input, without the quotes.
func (c *Cursor) TextString() ([]byte, bool) {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil, false
	}
	start := c.i + 1
	end := bytes.IndexByte(c.b[start:], '"')
	if end < 0 {
		return nil, false
	}
	s := c.b[start : start+end]
	for _, ch := range s {
		if ch < 0x20 || ch == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(s) {
		return nil, false
	}
	c.i = start + end + 1
	return s, true
}

// maxPlainNumber is the longest number Value lets by without parsing it
// when it has no exponent: a float64 holds every number of up to 308
// integer digits.
const maxPlainNumber = 300

// Value skips one JSON value and returns its bytes, in the input (nil when
// it ends early). It does not check the value's validity: its callers
// check the whole input once, with json.Valid. It notes a number a float64
// cannot hold (BigNumber).
func (c *Cursor) Value() []byte {
	start, depth := c.i, 0
	token, exp := c.i, false // where the current number or literal began; whether it has an exponent
	for c.i < len(c.b) {
		switch ch := c.b[c.i]; ch {
		case '"':
			if !c.skipString() {
				return nil
			}
			if depth == 0 {
				return c.b[start:c.i]
			}
			token = c.i
			continue
		case '{', '[':
			depth++
			token = c.i + 1
		case '}', ']':
			c.number(token, exp)
			if depth == 0 {
				return c.scalar(start)
			}
			depth--
			if depth == 0 {
				c.i++
				return c.b[start:c.i]
			}
			token, exp = c.i+1, false
		case ',', ' ', '\t', '\n', '\r', ':':
			c.number(token, exp)
			if depth == 0 {
				return c.scalar(start)
			}
			token, exp = c.i+1, false
		case 'e', 'E':
			exp = exp || c.i > token && c.b[c.i-1] >= '0' && c.b[c.i-1] <= '9' // not true's or false's
		}
		c.i++
	}
	c.number(token, exp)
	if depth == 0 {
		return c.scalar(start)
	}
	return nil
}

// number checks the token that ended at i, when it may be a number a
// float64 cannot hold: one with an exponent, or a long one.
func (c *Cursor) number(token int, exp bool) {
	if !exp && c.i-token <= maxPlainNumber {
		return
	}
	if _, err := strconv.ParseFloat(string(c.b[token:c.i]), 64); err != nil {
		c.big = true
	}
}

// BigNumber reports whether a value Value read held a number
// json.Unmarshal refuses to decode into an interface: one out of a
// float64's range, such as 1e400 (or a token that is no number at all).
func (c *Cursor) BigNumber() bool { return c.big }

// scalar is the number or literal that began at start and ends at i.
func (c *Cursor) scalar(start int) []byte {
	if c.i == start {
		return nil
	}
	return c.b[start:c.i]
}

// skipString moves past the string at i, escapes included.
func (c *Cursor) skipString() bool {
	for i := c.i + 1; i < len(c.b); i++ {
		switch c.b[i] {
		case '\\':
			i++
		case '"':
			c.i = i + 1
			return true
		}
	}
	return false
}

// Array reads [v, …] into the values' bytes (an empty, not nil, slice for
// [], as json.Unmarshal gives).
func (c *Cursor) Array() ([]json.RawMessage, bool) {
	if !c.Next('[') {
		return nil, false
	}
	out := make([]json.RawMessage, 0, 1)
	if c.Next(']') {
		return out, true
	}
	for {
		c.Space()
		v := c.Value()
		if v == nil {
			return nil, false
		}
		out = append(out, v)
		if c.Next(']') {
			return out, true
		}
		if !c.Next(',') {
			return nil, false
		}
	}
}

// Boolean reads true or false.
func (c *Cursor) Boolean() (bool, bool) {
	switch v := string(c.Value()); v {
	case "true", "false":
		return v == "true", true
	}
	return false, false
}

// Tail reads the rest of the input as the value of an object's last
// member: everything up to the object's closing brace, which must end the
// input (trailing whitespace aside), without the whitespace around it. It
// returns nil when the input does not end so. Whether the bytes are one
// JSON value is the caller's to check (json.Valid): when they are, the
// object closes right after them.
func (c *Cursor) Tail() []byte {
	c.Space()
	end := len(c.b)
	for end > c.i && IsSpace(c.b[end-1]) {
		end--
	}
	if end <= c.i || c.b[end-1] != '}' {
		return nil
	}
	end--
	for end > c.i && IsSpace(c.b[end-1]) {
		end--
	}
	if end == c.i {
		return nil
	}
	v := c.b[c.i:end]
	c.i = len(c.b)
	return v
}
