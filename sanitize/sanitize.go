// Package sanitize makes text that came from an untrusted upstream safe to
// show a model, a log and a terminal. Every string an upstream controls
// passes through it before it leaves the gateway: content blocks, tool error
// text, structured data, tool titles and descriptions, error reasons.
package sanitize

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"
)

// Text makes upstream text safe to show a model and a terminal: ANSI
// escape sequences, C0/C1 control characters (except tab and newline),
// bidirectional controls, zero-width and tag characters (see Invisible) and
// invalid UTF-8 are removed; CRLF becomes LF. Text already clean is
// returned as is, without a copy.
func Text(s string) string {
	i := cleanPrefix(s)
	if i == len(s) {
		return s
	}
	rest := strings.ToValidUTF8(s[i:], "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	prev, _ := utf8.DecodeLastRuneInString(s[:i]) // RuneError at the start: not an emoji
	for j := 0; j < len(rest); {
		if rest[j] == 0x1b {
			j += escapeLen(rest[j:])
			prev = 0x1b
			continue
		}
		r, size := utf8.DecodeRuneInString(rest[j:])
		j += size
		if r == zeroWidthJoiner {
			if next, _ := utf8.DecodeRuneInString(rest[j:]); joinsEmoji(prev, next) {
				b.WriteRune(r)
			}
		} else if keepRune(r) {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// cleanPrefix is the length of the longest prefix of s that Text keeps
// unchanged: most text is clean, and is then neither copied nor rebuilt.
func cleanPrefix(s string) int {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f || c == '\n' || c == '\t' {
				i++
				continue
			}
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == zeroWidthJoiner || !keepRune(r) {
			return i
		}
		i += size
	}
	return len(s)
}

func keepRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return false
	case r < 0x200b:
		return true // most text: nothing below is in this range
	case Bidi(r), Invisible(r):
		return false
	}
	return true
}

// Bidi reports a bidirectional embedding, override or isolate (U+202A..
// U+202E, U+2066..U+2069): text that reads differently than it shows.
func Bidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// Invisible reports a character that shows nothing yet reaches whoever
// reads the text, a model above all: ZeroWidth or Tag. Text removes them
// from everything an upstream sends, and the description scan (package
// upstreams) reports and strips them in tool descriptions; this is the one
// list both use.
func Invisible(r rune) bool { return ZeroWidth(r) || Tag(r) }

// ZeroWidth reports a zero-width character: space, non-joiner and joiner
// (U+200B..U+200D), the left-to-right and right-to-left marks (U+200E,
// U+200F), the word joiner (U+2060) and the zero-width no-break space or
// byte order mark (U+FEFF).
//
// Text removes them all, with one exception, the zero-width joiner between
// two emoji (see joinsEmoji). Removing them costs little legitimate text:
// the non-joiner and joiner also shape some scripts (Persian, Indic), where
// the text stays readable without them, with letters joined or a conjunct
// in place of a half form; the marks only nudge where neutral characters
// show in right-to-left text, as the bidi controls removed with them do
// more strongly. A byte order mark at the start of a text is removed too:
// it marks the encoding of a file, and a string inside a JSON-RPC message
// has no byte order to mark (as with CRLF, a file read through a tool is
// not returned byte for byte).
func ZeroWidth(r rune) bool {
	return r >= 0x200b && r <= 0x200f || r == 0x2060 || r == 0xfeff
}

// Tag reports a Unicode tag character (U+E0000..U+E007F): an invisible
// copy of ASCII, the "ASCII smuggling" channel for hidden instructions.
// Their one visible use, the tags that make a black flag the flag of a
// region (England, Scotland, Wales), is lost: the flag shows as a black flag.
func Tag(r rune) bool { return r >= 0xe0000 && r <= 0xe007f }

const zeroWidthJoiner = 0x200d

// joinsEmoji decides the zero-width joiner: kept only directly between two
// emoji, where it makes one sequence of them (a family, a profession, a
// flag: "\U0001F469\u200d\U0001F4BB" is one "woman technologist"), and
// removed everywhere else, runs of joiners included. Removing every joiner
// would break those sequences into their parts in every result; keeping
// every joiner would leave a channel one invisible character wide. Kept
// between emoji it can carry at most one bit per pair of adjacent emoji,
// and next to letters, digits or another invisible character nothing.
// Emoji here is broad: the blocks emoji live in (arrows to miscellaneous
// symbols, U+2190..U+2BFF, and U+1F000..U+1FAFF, skin tones included) and
// the emoji variation selector U+FE0F that may end the emoji before a joiner.
func joinsEmoji(prev, next rune) bool {
	return emojiLike(prev) && emojiLike(next)
}

func emojiLike(r rune) bool {
	return r >= 0x1f000 && r <= 0x1faff || r >= 0x2190 && r <= 0x2bff || r == 0xfe0f
}

// escapeLen is the length of the escape sequence at the start of s (which
// begins with ESC): CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \),
// or a two-byte escape.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	return 2
}

// Clip bounds s to n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// JSON returns raw with every string (keys included) passed through Text.
// Numbers keep their exact digits. It fails only on invalid JSON.
func JSON(raw []byte) ([]byte, error) {
	if !needsCleaning(raw) && json.Valid(raw) {
		return raw, nil // nothing to clean: skip decoding it (every call's result passes here)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if !needsCleaning(raw) {
		return raw, nil
	}
	return json.Marshal(cleanValue(v))
}

// needsCleaning is a fast path: JSON whose strings Text would keep as they
// are (no control bytes, no escape that decodes to something Text removes,
// no character Text removes) is returned as is.
func needsCleaning(raw []byte) bool {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			i++ // most bytes
			continue
		}
		switch {
		case c == '\\':
			n := safeEscapeLen(raw[i:])
			if n == 0 {
				return true
			}
			i += n
		case c < utf8.RuneSelf:
			return true // a control byte
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 || r == zeroWidthJoiner || !keepRune(r) {
				return true
			}
			i += size
		}
	}
	return false
}

// safeEscapeLen is the length of the JSON escape at the start of b when it
// stands for a character Text keeps whatever its neighbours, else 0.
func safeEscapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'n', 't':
		return 2
	case 'u':
		if len(b) < 6 {
			return 0
		}
		var r rune
		for _, h := range b[2:6] {
			switch {
			case h >= '0' && h <= '9':
				r = r<<4 | rune(h-'0')
			case h >= 'a' && h <= 'f':
				r = r<<4 | rune(h-'a'+10)
			case h >= 'A' && h <= 'F':
				r = r<<4 | rune(h-'A'+10)
			default:
				return 0
			}
		}
		if r >= 0xd800 && r <= 0xdfff || r == zeroWidthJoiner || !keepRune(r) {
			return 0 // surrogates (tag characters are pairs) are decoded to be judged
		}
		return 6
	}
	return 0
}

func cleanValue(v any) any {
	switch t := v.(type) {
	case string:
		return Text(t)
	case []any:
		for i := range t {
			t[i] = cleanValue(t[i])
		}
		return t
	case map[string]any:
		// Two keys may clean to one ("note" and "no\u200bte"): the key that
		// was clean wins, else the first dirty one in byte order, so the
		// answer never depends on map order.
		out := make(map[string]any, len(t))
		var dirty []string
		for k, child := range t {
			if Text(k) == k {
				out[k] = cleanValue(child)
			} else {
				dirty = append(dirty, k)
			}
		}
		sort.Strings(dirty)
		for _, k := range dirty {
			if ck := Text(k); !has(out, ck) {
				out[ck] = cleanValue(t[k])
			}
		}
		return out
	}
	return v
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
