package proxy

import (
	"strings"
	"unicode/utf8"
)

// maxToolMessage bounds a tool's own error text in a tool_failed message.
const maxToolMessage = 1000

// sanitize makes upstream text safe to show a model and a terminal: ANSI
// escape sequences, C0/C1 control characters (except tab and newline),
// bidirectional overrides and invalid UTF-8 are removed; CRLF becomes LF.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			i += escapeLen(s[i:])
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if keepRune(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func keepRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return false // bidi embeddings, overrides and isolates
	}
	return true
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

// clip bounds s to n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
