// Package sanitize makes text that came from an untrusted upstream safe to
// show a model, a log and a terminal. Every string an upstream controls
// passes through it before it leaves the gateway: content blocks, tool error
// text, structured data, tool titles and descriptions, error reasons.
package sanitize

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Text makes upstream text safe to show a model and a terminal: ANSI
// escape sequences, C0/C1 control characters (except tab and newline),
// bidirectional overrides and invalid UTF-8 are removed; CRLF becomes LF.
func Text(s string) string {
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

// needsCleaning is a fast path: JSON without escapes, control bytes or
// bytes that could start a bidi control is returned as is.
func needsCleaning(raw []byte) bool {
	for _, c := range raw {
		if c < 0x20 || c == '\\' || c == 0x7f || c >= 0x80 {
			return true
		}
	}
	return false
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
		out := make(map[string]any, len(t))
		for k, child := range t {
			out[Text(k)] = cleanValue(child)
		}
		return out
	}
	return v
}
