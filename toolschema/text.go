package toolschema

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// truncateStart cuts s to at most n bytes by dropping its beginning.
func truncateStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - (n - len("…"))
	for cut < len(s) && !utf8RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
