package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Definition is everything about a tool that a model reads or that changes
// what a call means: what is pinned. Name is the upstream's own tool name.
// The raw fields are JSON as the upstream sent it; empty and null are the
// same (no such field).
type Definition struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
}

// HashPrefix starts every hash, so the algorithm is named in the lock file.
const HashPrefix = "sha256:"

// maxDepth bounds nesting in canonicalised JSON. Schemas are capped far
// lower by toolschema; this guards annotations and the lock file.
const maxDepth = 256

// Canonical is the definition as canonical JSON: an object with exactly the
// keys annotations, description, inputSchema, name, outputSchema and title,
// objects' keys sorted (by UTF-8 bytes, i.e. by code point) at every level,
// no insignificant whitespace, strings with only the escapes JSON requires
// (", \ and control characters; everything else literal), and numbers by
// exact value (1, 1.0, 10e-1 and 1E0 are all written 1; see
// canonicalNumber). Missing schemas and annotations are null.
//
// It fails on invalid JSON, invalid UTF-8, lone surrogate escapes, duplicate
// keys and nesting deeper than 256: a definition that parsers could read in
// two ways cannot be pinned to one meaning.
func (d Definition) Canonical() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"annotations":`)
	if err := writeRawField(&b, "annotations", d.Annotations); err != nil {
		return nil, err
	}
	b.WriteString(`,"description":`)
	if err := writeStringField(&b, "description", d.Description); err != nil {
		return nil, err
	}
	b.WriteString(`,"inputSchema":`)
	if err := writeRawField(&b, "inputSchema", d.InputSchema); err != nil {
		return nil, err
	}
	b.WriteString(`,"name":`)
	if err := writeStringField(&b, "name", d.Name); err != nil {
		return nil, err
	}
	b.WriteString(`,"outputSchema":`)
	if err := writeRawField(&b, "outputSchema", d.OutputSchema); err != nil {
		return nil, err
	}
	b.WriteString(`,"title":`)
	if err := writeStringField(&b, "title", d.Title); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Hash is "sha256:" and the lowercase hex SHA-256 of Canonical.
func (d Definition) Hash() (string, error) {
	c, err := d.Canonical()
	if err != nil {
		return "", err
	}
	return hashOf(c), nil
}

func hashOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return HashPrefix + hex.EncodeToString(sum[:])
}

func writeStringField(b *bytes.Buffer, field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: not valid UTF-8", field)
	}
	writeString(b, s)
	return nil
}

func writeRawField(b *bytes.Buffer, field string, raw json.RawMessage) error {
	if isNullRaw(raw) {
		b.WriteString("null")
		return nil
	}
	c, err := CanonicalJSON(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	b.Write(c)
	return nil
}

// isNullRaw: an absent field and an explicit null mean the same.
func isNullRaw(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// ParseDefinition reads a definition back from its canonical JSON (as kept
// in the lock file). It accepts any JSON object with those keys.
func ParseDefinition(canonical []byte) (Definition, error) {
	var f struct {
		Name         *string         `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Definition{}, fmt.Errorf("definition: %w", err)
	}
	if f.Name == nil || *f.Name == "" {
		return Definition{}, errors.New("definition: no name")
	}
	d := Definition{Name: *f.Name, Title: f.Title, Description: f.Description}
	for _, p := range []struct {
		dst *json.RawMessage
		raw json.RawMessage
	}{{&d.InputSchema, f.InputSchema}, {&d.OutputSchema, f.OutputSchema}, {&d.Annotations, f.Annotations}} {
		if !isNullRaw(p.raw) {
			*p.dst = p.raw
		}
	}
	return d, nil
}

// CanonicalJSON rewrites one JSON value in the canonical form described at
// Definition.Canonical.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	p := &parser{s: raw}
	n, err := p.parse()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	n.write(&b)
	return b.Bytes(), nil
}

// node is one parsed JSON value. Strings are decoded; numbers are kept in
// canonical form; objects keep their members sorted by key.
type node struct {
	kind byte // '{', '[', '"', '0' (number), 'l' (true, false, null: lit)
	lit  string
	keys []string
	kids []*node
}

func (n *node) write(b *bytes.Buffer) {
	switch n.kind {
	case '"':
		writeString(b, n.lit)
	case '0', 'l':
		b.WriteString(n.lit)
	case '[':
		b.WriteByte('[')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			k.write(b)
		}
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, n.keys[i])
			b.WriteByte(':')
			k.write(b)
		}
		b.WriteByte('}')
	}
}

// writeString writes s as a JSON string with only the escapes JSON requires.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// parser is a strict recursive-descent JSON parser (RFC 8259) bounded by
// maxDepth. It is separate from encoding/json because that one keeps the
// last of duplicate keys, turns lone surrogates into U+FFFD and reads
// numbers as float64.
type parser struct {
	s     []byte
	i     int
	depth int
}

func (p *parser) parse() (*node, error) {
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errorf("unexpected data after the value")
	}
	return n, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() (*node, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &node{kind: '"', lit: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.s[p.i:], []byte(lit)) {
			p.i += len(lit)
			return &node{kind: 'l', lit: lit}, nil
		}
	}
	return nil, p.errorf("unexpected character %q", p.s[p.i])
}

func (p *parser) enter() error {
	if p.depth++; p.depth > maxDepth {
		return p.errorf("nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) object() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.i++ // {
	n := &node{kind: '{'}
	type member struct {
		key string
		val *node
	}
	var ms []member
	seen := map[string]bool{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return n, nil
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errorf("expected a key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, p.errorf("duplicate key %q", k)
		}
		seen[k] = true
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{k, v})
		p.space()
		if p.i >= len(p.s) {
			return nil, p.errorf("unexpected end of input")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] != '}' {
			return nil, p.errorf("expected ',' or '}'")
		}
		p.i++
		break
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	for _, m := range ms {
		n.keys = append(n.keys, m.key)
		n.kids = append(n.kids, m.val)
	}
	return n, nil
}

func (p *parser) array() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.i++ // [
	n := &node{kind: '['}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return n, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, v)
		p.space()
		if p.i >= len(p.s) {
			return nil, p.errorf("unexpected end of input")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] != ']' {
			return nil, p.errorf("expected ',' or ']'")
		}
		p.i++
		return n, nil
	}
}

// str reads a string literal at p.i (which is '"') and returns its value.
func (p *parser) str() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in a string")
		case c != '\\':
			// The input is valid UTF-8 (checked up front): copy the run of
			// plain bytes.
			j := p.i
			for j < len(p.s) && p.s[j] != '"' && p.s[j] != '\\' && p.s[j] >= 0x20 {
				j++
			}
			b.Write(p.s[p.i:j])
			p.i = j
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", p.errorf("unterminated escape")
		}
		esc := p.s[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || p.i+1 >= len(p.s) || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' {
					return "", p.errorf("lone surrogate \\u%04x", r)
				}
				p.i += 2
				lo, err := p.hex4()
				if err != nil {
					return "", err
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", p.errorf("invalid surrogate pair")
				}
			}
			b.WriteRune(r)
		default:
			return "", p.errorf("invalid escape \\%c", esc)
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, p.errorf("invalid \\u escape")
	}
	p.i += 4
	return rune(v), nil
}

// number reads a number literal (RFC 8259 grammar) and keeps its canonical
// form.
func (p *parser) number() (*node, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		return p.i - j
	}
	switch n := digits(); {
	case n == 0:
		return nil, p.errorf("invalid number")
	case n > 1 && p.s[p.i-n] == '0':
		return nil, p.errorf("number with a leading zero")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	return &node{kind: '0', lit: canonicalNumber(string(p.s[start:p.i]))}, nil
}

// canonicalNumber writes a valid JSON number literal by its exact value:
// the value is split into significant digits D (no leading or trailing
// zeros) and a decimal exponent E (value = D × 10^E), with E kept in a
// big.Int so that no exponent overflows and nothing passes through float64.
// Then, with n digits:
//
//	0                              -> 0 (also -0)
//	E >= 0 and n+E <= 21           -> integer digits:        100, 12345
//	-7 < n+E <= 0 or 0 < n+E < n   -> decimal:               0.001, 12.5
//	otherwise                      -> D[0].D[1:]e<n+E-1>:    1e+400 is 1e400, 1.5e-9
//
// so the form depends only on the value, and two literals of the same value
// hash the same.
func canonicalNumber(lit string) string {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, _ := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0"
	}
	exp := new(big.Int)
	if expPart != "" {
		exp.SetString(strings.TrimPrefix(expPart, "+"), 10) // the grammar was checked
	}
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	digits = trimmed
	n := int64(len(digits))

	sign := ""
	if neg {
		sign = "-"
	}
	point := new(big.Int).Add(exp, big.NewInt(n)) // digits before the decimal point
	if point.IsInt64() {
		pt := point.Int64()
		switch {
		case pt >= n && pt <= 21: // exp >= 0
			return sign + digits + strings.Repeat("0", int(pt-n))
		case pt > 0 && pt < n:
			return sign + digits[:pt] + "." + digits[pt:]
		case pt <= 0 && pt > -7:
			return sign + "0." + strings.Repeat("0", int(-pt)) + digits
		}
	}
	sci := digits[:1]
	if n > 1 {
		sci += "." + digits[1:]
	}
	adj := new(big.Int).Sub(point, big.NewInt(1))
	return sign + sci + "e" + adj.String()
}
