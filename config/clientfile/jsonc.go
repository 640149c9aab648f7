package clientfile

// stripJSONC turns JSON with comments and trailing commas (VS Code's JSONC) into plain JSON of the same
// length: comments and trailing commas become spaces, and newlines are kept, so an offset that
// encoding/json reports points at the same line and column in the file as written.
//
// It is written here rather than taken from a library because it is one small state machine (strings,
// escapes, two comment forms, a comma followed only by blanks and comments before } or ]) and the
// JSONC libraries bring more than that (their own parsers and value models) for no gain here.
// An unterminated block comment is left for encoding/json to reject, as invalid JSON.
func stripJSONC(in []byte) []byte {
	out := make([]byte, len(in))
	copy(out, in)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	lastComma := -1 // the offset of a comma that may yet turn out to be trailing
	for i := 0; i < len(out); {
		c := out[i]
		switch {
		case c == '"':
			lastComma = -1
			i++
			for i < len(out) && out[i] != '"' && out[i] != '\n' {
				if out[i] == '\\' {
					i++
				}
				i++
			}
			i++ // the closing quote (or past the end: encoding/json reports the bad string)
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			end := i + 2
			for end < len(out) && out[end] != '\n' {
				end++
			}
			blank(i, end)
			i = end
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := i + 2
			for end+1 < len(out) && !(out[end] == '*' && out[end+1] == '/') {
				end++
			}
			if end+1 >= len(out) {
				return out // unterminated: leave it, so the JSON error points at it
			}
			blank(i, end+2)
			i = end + 2
		case c == ',':
			lastComma = i
			i++
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			lastComma = -1
			i++
		}
	}
	return out
}
