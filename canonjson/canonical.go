package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalidJSON is wrapped by every error Canonical returns for input that
// is not one well-formed JSON value (RFC 8259), including invalid UTF-8, lone
// UTF-16 surrogate escapes and nesting deeper than 256 levels.
var ErrInvalidJSON = errors.New("invalid JSON")

// ErrDuplicateKey is wrapped by the error Canonical returns for an object
// with two members of the same name (compared after decoding escapes).
var ErrDuplicateKey = errors.New("duplicate object key")

// maxDepth bounds the nesting of arrays and objects. Tool arguments,
// schemas, annotations and lock files never come close; a bound keeps a
// hostile value from exhausting the stack.
const maxDepth = 256

// Canonical returns the canonical form of one JSON value: object keys sorted, no insignificant whitespace,
// numbers by exact value (1, 1.0 and 1e0 are equal; 9007199254740993 stays distinct from 9007199254740992 — use
// math/big, never float64), strings by their decoded value (escapes normalised). Duplicate keys or invalid JSON → error.
//
// The canonical form is itself valid JSON, and Canonical is idempotent on it:
//
//   - Objects: members sorted by the bytes of their decoded UTF-8 names
//     (code point order). Two members with the same decoded name are an
//     error (ErrDuplicateKey): parsers disagree on which one wins, so such
//     arguments have no single meaning.
//   - Arrays keep their order.
//   - Strings are written with their decoded value: only '"', '\\' and
//     control characters below U+0020 are escaped (as \" \\ \b \f \n \r \t,
//     else \u00XX, lower-case hex); everything else is literal UTF-8. Invalid
//     UTF-8 and lone surrogate escapes ("\ud800") are errors
//     (ErrInvalidJSON): decoders replace them with U+FFFD or keep them as they
//     are, so they have no single value, and folding them to U+FFFD would make
//     distinct arguments equal.
//   - Numbers are reduced to their exact decimal value d×10^e (no leading or
//     trailing zeros in d; -0 is 0) and written as an integer when
//     0 <= e <= 21, as a plain decimal when the value has a fraction and its
//     first significant digit is at most 6 places after the point, else in
//     exponent form ("1.5e-7", "1e22"). The exponent is arbitrary precision
//     (math/big), so "1e99999999999999999999" neither overflows nor equals
//     any other number; no float64 is involved anywhere. A number never
//     grows by more than 21 zeros, so the output stays about as long as the
//     input.
//   - Literals true, false and null are kept.
//   - Arrays and objects may nest at most 256 deep (ErrInvalidJSON).
//
// Any top-level JSON value is accepted. Empty input is not JSON and is an
// error: a caller that treats absent tool arguments as {} (as validation
// does) passes {}.
func Canonical(raw []byte) ([]byte, error) {
	c := scratchPool.Get().(*canonicalizer)
	defer c.release()
	c.in, c.pos, c.out = raw, 0, make([]byte, 0, len(raw))
	c.skipSpace()
	if err := c.value(0); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return nil, c.syntax("unexpected %s after the value", c.describe())
	}
	return c.out, nil
}

// scratchPool keeps canonicalizers, for their scratch buffers.
var scratchPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// maxPooledScratch bounds the scratch a pooled canonicalizer keeps, so that
// one huge argument object does not pin its buffers for ever.
const maxPooledScratch = 64 << 10

func (c *canonicalizer) release() {
	c.in, c.out = nil, nil
	if cap(c.str)+cap(c.digits)+cap(c.names)+cap(c.rewrite) > maxPooledScratch || cap(c.members) > maxPooledScratch/32 {
		return
	}
	c.str, c.digits, c.names, c.rewrite, c.members = c.str[:0], c.digits[:0], c.names[:0], c.rewrite[:0], c.members[:0]
	scratchPool.Put(c)
}

// canonicalizer is a strict single-pass JSON parser that writes the
// canonical form of what it reads.
type canonicalizer struct {
	in      []byte
	pos     int
	out     []byte
	str     []byte   // scratch: the decoded value of the current string
	digits  []byte   // scratch: the significant digits of the current number
	names   []byte   // scratch: decoded member names of the objects being read
	rewrite []byte   // scratch: an object's members while they are reordered
	members []member // the members of the objects being read, innermost last
}

// member is one object member already written to out: `"name":value`.
type member struct {
	name       span // its decoded name in names
	start, end int  // its span in out
	at         int  // offset of its name in the input, for errors
}

type span struct{ start, end int }

func (c *canonicalizer) name(m member) []byte { return c.names[m.name.start:m.name.end] }

func (c *canonicalizer) compareNames(a, b member) int { return bytes.Compare(c.name(a), c.name(b)) }

func (c *canonicalizer) syntax(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrInvalidJSON, c.pos, fmt.Sprintf(format, args...))
}

// describe names what is at the current position, for error messages.
func (c *canonicalizer) describe() string {
	if c.pos >= len(c.in) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(c.in[c.pos:])
	return strconv.QuoteRune(r)
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.syntax("expected a value, got end of input")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		s, err := c.string()
		if err != nil {
			return err
		}
		c.out = appendString(c.out, s)
		return nil
	case b == '-' || ('0' <= b && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.syntax("expected a value, got %s", c.describe())
	}
}

func (c *canonicalizer) literal(word string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(word)) {
		return c.syntax("expected %s", word)
	}
	c.pos += len(word)
	c.out = append(c.out, word...)
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxDepth {
		return c.syntax("nested deeper than %d", maxDepth)
	}
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntax("unterminated array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.syntax("expected ',' or ']' in array, got %s", c.describe())
		}
	}
}

// object writes the members in input order, then, unless they already are,
// sorts them by name and rewrites them in place.
func (c *canonicalizer) object(depth int) error {
	if depth > maxDepth {
		return c.syntax("nested deeper than %d", maxDepth)
	}
	c.pos++ // {
	start := len(c.out)
	c.out = append(c.out, '{')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	base, nameBase := len(c.members), len(c.names) // enclosing objects' stay below
	defer func() { c.members, c.names = c.members[:base], c.names[:nameBase] }()
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.syntax("expected a string for an object key, got %s", c.describe())
		}
		at := c.pos
		name, err := c.string()
		if err != nil {
			return err
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		c.names = append(c.names, name...)
		m := member{name: span{len(c.names) - len(name), len(c.names)}, start: len(c.out), at: at}
		c.out = appendString(c.out, name)
		c.out = append(c.out, ':')
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.syntax("expected ':' after object key, got %s", c.describe())
		}
		c.pos++
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntax("unterminated object")
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return c.syntax("expected ',' or '}' in object, got %s", c.describe())
		}
		c.pos++
	}
	ms := c.members[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if c.compareNames(ms[i-1], ms[i]) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(ms, c.compareNames)
		for i := 1; i < len(ms); i++ {
			if c.compareNames(ms[i-1], ms[i]) == 0 {
				return fmt.Errorf("%w %q at offset %d", ErrDuplicateKey, c.name(ms[i]), max(ms[i-1].at, ms[i].at))
			}
		}
		c.rewrite = append(c.rewrite[:0], c.out[start+1:]...)
		written := c.rewrite
		c.out = c.out[:start+1]
		for i, m := range ms {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, written[m.start-start-1:m.end-start-1]...)
		}
	}
	c.out = append(c.out, '}')
	return nil
}

// string reads a string at c.pos and returns its decoded value, valid UTF-8,
// in scratch space that the next call reuses.
func (c *canonicalizer) string() ([]byte, error) {
	c.pos++ // opening quote
	c.str = c.str[:0]
	for {
		// Copy the run of bytes that need no decoding in one go.
		run := c.pos
		for c.pos < len(c.in) {
			b := c.in[c.pos]
			if b == '"' || b == '\\' || b < 0x20 || b >= utf8.RuneSelf {
				break
			}
			c.pos++
		}
		c.str = append(c.str, c.in[run:c.pos]...)
		if c.pos >= len(c.in) {
			return nil, c.syntax("unterminated string")
		}
		switch b := c.in[c.pos]; {
		case b == '"':
			c.pos++
			return c.str, nil
		case b < 0x20:
			return nil, c.syntax("control character %U in a string must be escaped", rune(b))
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, c.syntax("invalid UTF-8 in a string")
			}
			c.str = append(c.str, c.in[c.pos:c.pos+size]...)
			c.pos += size
		default: // backslash
			if err := c.escape(); err != nil {
				return nil, err
			}
		}
	}
}

// escape decodes one escape sequence at c.pos into c.str.
func (c *canonicalizer) escape() error {
	if c.pos+1 >= len(c.in) {
		return c.syntax("unterminated escape")
	}
	e := c.in[c.pos+1]
	if e != 'u' {
		var r byte
		switch e {
		case '"', '\\', '/':
			r = e
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		default:
			return c.syntax("invalid escape \\%c", e)
		}
		c.str = append(c.str, r)
		c.pos += 2
		return nil
	}
	r, ok := Hex4(c.in[c.pos+2:])
	if !ok {
		return c.syntax("invalid \\u escape")
	}
	c.pos += 6
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low escape must follow
		lo, ok := rune(-1), false
		if c.pos+1 < len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
			lo, ok = Hex4(c.in[c.pos+2:])
		}
		if !ok || lo < 0xdc00 || lo > 0xdfff {
			c.pos -= 6
			return c.syntax("lone UTF-16 surrogate \\u%04x", r)
		}
		c.pos += 6
		r = utf16.DecodeRune(r, lo)
	case utf16.IsSurrogate(r):
		c.pos -= 6
		return c.syntax("lone UTF-16 surrogate \\u%04x", r)
	}
	c.str = utf8.AppendRune(c.str, r)
	return nil
}

// Hex4 is the value of the four hex digits at the start of b, the XXXX of
// a \uXXXX escape; false when b does not start with four. The gateway's
// other hand-written decoder (internal/jsonscan's strings) shares it.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, h := range b[:4] {
		switch {
		case '0' <= h && h <= '9':
			h -= '0'
		case 'a' <= h && h <= 'f':
			h -= 'a' - 10
		case 'A' <= h && h <= 'F':
			h -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// AppendString appends s, which must be valid UTF-8, to dst as a canonical
// JSON string (the form Canonical writes strings in).
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte { return appendString(dst, s) }

// appendString writes s, valid UTF-8, as a canonical JSON string.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	run := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = AppendEscapedASCII(append(dst, s[run:i]...), b)
		run = i + 1
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}

// number reads a number at c.pos (RFC 8259 grammar) and writes its
// canonical form.
func (c *canonicalizer) number() error {
	neg := false
	if c.in[c.pos] == '-' {
		neg = true
		c.pos++
	}
	intPart, ok := c.digitRun()
	switch {
	case !ok:
		return c.syntax("expected a digit, got %s", c.describe())
	case len(intPart) > 1 && intPart[0] == '0':
		return c.syntax("leading zero in a number")
	}
	var frac []byte
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		if frac, ok = c.digitRun(); !ok {
			return c.syntax("expected a digit after the decimal point, got %s", c.describe())
		}
	}
	var expNeg bool
	var exp []byte
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			expNeg = c.in[c.pos] == '-'
			c.pos++
		}
		if exp, ok = c.digitRun(); !ok {
			return c.syntax("expected a digit in the exponent, got %s", c.describe())
		}
	}

	// value = intPart.frac × 10^exp = d × 10^e, d without leading or
	// trailing zeros.
	d := append(append(c.digits[:0], intPart...), frac...)
	c.digits = d
	for len(d) > 0 && d[0] == '0' {
		d = d[1:]
	}
	if len(d) == 0 {
		c.out = append(c.out, '0')
		return nil
	}
	trailing := 0
	for d[len(d)-1] == '0' {
		d = d[:len(d)-1]
		trailing++
	}
	if neg {
		c.out = append(c.out, '-')
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) <= 15 { // |exponent| < 10^15: e fits an int64 with room to spare
		var e int64
		for _, b := range exp {
			e = e*10 + int64(b-'0')
		}
		if expNeg {
			e = -e
		}
		c.out = appendDecimal(c.out, d, e+int64(trailing)-int64(len(frac)))
		return nil
	}
	// A huge exponent: only the exponent form fits, and its exponent needs
	// big arithmetic. The input's own length bounds len(frac) and trailing
	// far below 10^15, so the exponent form is the one appendDecimal would
	// pick too.
	e, _ := new(big.Int).SetString(string(exp), 10)
	if expNeg {
		e.Neg(e)
	}
	e.Add(e, big.NewInt(int64(trailing)-int64(len(frac))+int64(len(d))-1))
	c.out = appendExponentForm(c.out, d, e.String())
	return nil
}

// digitRun reads one or more decimal digits.
func (c *canonicalizer) digitRun() ([]byte, bool) {
	start := c.pos
	for c.pos < len(c.in) && '0' <= c.in[c.pos] && c.in[c.pos] <= '9' {
		c.pos++
	}
	return c.in[start:c.pos], c.pos > start
}

// appendDecimal writes d × 10^e, d a non-empty digit string with no leading
// or trailing zeros, in the form Canonical documents.
func appendDecimal(dst, d []byte, e int64) []byte {
	const maxIntZeros = 21     // 1e21 is still written out, 1e22 is not
	const minPointPos = -5     // 0.000001 (1e-6) is written out, 1e-7 is not
	point := int64(len(d)) + e // value = 0.d × 10^point
	switch {
	case e >= 0 && e <= maxIntZeros:
		dst = append(dst, d...)
		for range e {
			dst = append(dst, '0')
		}
	case e < 0 && point > 0:
		dst = append(dst, d[:point]...)
		dst = append(dst, '.')
		dst = append(dst, d[point:]...)
	case e < 0 && point >= minPointPos:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = appendExponentForm(dst, d, strconv.FormatInt(point-1, 10))
	}
	return dst
}

// appendExponentForm writes d[0].d[1:]e<exp>.
func appendExponentForm(dst, d []byte, exp string) []byte {
	dst = append(dst, d[0])
	if len(d) > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	dst = append(dst, 'e')
	return append(dst, exp...)
}

// AppendEscapedASCII appends the escape of one ASCII byte a JSON string
// cannot hold as it is (a quote, a backslash, a control character) or that
// an encoder chooses to escape (encoding/json's <, > and &): the two-byte
// form where JSON has one, else \u00XX in lower-case hex. The gateway's
// other hand-written encoder (proxy's answers) shares it.
func AppendEscapedASCII(dst []byte, b byte) []byte {
	const hexDigits = "0123456789abcdef"
	switch b {
	case '"', '\\':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	default:
		return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
	}
}
