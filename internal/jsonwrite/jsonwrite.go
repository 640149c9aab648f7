// Package jsonwrite writes the JSON the gateway sends, byte for byte as
// encoding/json would (json.Marshal: compact, HTML-escaped), by appending to
// a buffer sized once instead of through reflection and encoding/json's
// pooled buffers.
//
// Why a package: large tool results. json.Marshal of a 5 MiB text grows its
// pooled buffer by doubling, copies the result out, and returns the 8 MiB
// buffer to a pool that keeps it until two collections pass; a RawMessage
// is compacted into one such buffer and HTML-escaped into another. With
// 50 callers pulling 5 MiB results (bench/, the large-results figure) the
// gateway held about 45 MiB per answer in flight, four copies of the text
// and two grown buffers; what is written here holds each copy once, at its
// final size.
//
// Where jsonwrite and encoding/json could differ, a fuzz target holds it to
// encoding/json.
package jsonwrite

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/toolgate/toolgate/canonjson"
)

// AppendString appends s quoted as json.Marshal quotes a string (HTML
// escaping on): \" \\ \b \f \n \r \t, other control characters and < > &
// as \u00XX, U+2028 and U+2029 escaped, and invalid UTF-8 as \ufffd.
func AppendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if quotedLen[b] == 1 {
				i++
				continue
			}
			buf = canonjson.AppendEscapedASCII(append(buf, s[start:i]...), b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(append(buf, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(append(buf, s[start:i]...), '\\', 'u', '2', '0', '2', "0123456789abcdef"[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(buf, s[start:]...), '"')
}

// StringLen is len(AppendString(nil, s)), counted without writing: what
// a buffer needs for s quoted.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			n += int(quotedLen[b])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`)
		default:
			n += size
		}
		i += size
	}
	return n
}

// Quote is AppendString into a buffer of exactly the size it needs.
func Quote(s string) []byte {
	return AppendString(make([]byte, 0, StringLen(s)), s)
}

// quotedLen is how many bytes each ASCII byte takes in a quoted string:
// 1 as it is, 2 for the short escapes (\" \\ \b \f \n \r \t), 6 for
// \u00XX (other control characters, and < > & escaped for HTML). A table:
// a 5 MiB text is counted and quoted at ~2 ns a byte with it and ~7
// with the comparisons it replaces.
var quotedLen = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		switch {
		case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
			t[b] = 2
		case b < ' ' || b == '<' || b == '>' || b == '&':
			t[b] = 6
		default:
			t[b] = 1
		}
	}
	return t
}()

// AppendRaw appends raw as json.Marshal writes a json.RawMessage: compacted
// and HTML-escaped (empty is null). It fails, appending nothing, when raw is
// not one JSON value. Compacting writes straight into buf's spare room; only
// JSON holding < > & or U+2028/U+2029 inside its strings, which
// json.Marshal's own output never does, takes a second copy to escape. So
// raw must not lie in that spare room (buf[len(buf):cap(buf)]): it would be
// overwritten as it is read.
func AppendRaw(buf []byte, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return append(buf, "null"...), nil
	}
	start := len(buf)
	w := bytes.NewBuffer(buf)
	if err := json.Compact(w, raw); err != nil {
		return buf[:start], err
	}
	out := w.Bytes()
	if !needsHTMLEscape(out[start:]) {
		return out, nil
	}
	compact := bytes.Clone(out[start:])
	w = bytes.NewBuffer(out[:start])
	json.HTMLEscape(w, compact)
	return w.Bytes(), nil
}

// needsHTMLEscape reports whether compact JSON holds a byte json.HTMLEscape
// would change: < > & or the first byte of U+2028 or U+2029 (E2 80 A8/A9).
func needsHTMLEscape(b []byte) bool {
	for i, c := range b {
		if c == '<' || c == '>' || c == '&' {
			return true
		}
		if c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8 {
			return true
		}
	}
	return false
}
