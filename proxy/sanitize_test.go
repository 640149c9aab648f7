package proxy

import "testing"

func TestSanitize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"keeps\ttabs\nand newlines", "keeps\ttabs\nand newlines"},
		{"crlf\r\nline", "crlf\nline"},
		{"\x1b[31mred\x1b[0m", "red"},
		{"clear\x1b[2Jscreen", "clearscreen"},
		{"title\x1b]0;pwned\x07done", "titledone"},
		{"osc\x1b]8;;http://x\x1b\\link", "osclink"},
		{"nul\x00bell\x07del\x7f", "nulbelldel"},
		{"c1\u0085\u009bx", "c1x"},
		{"bidi\u202eevil\u2066x\u2069", "bidievilx"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"trailing esc\x1b", "trailing esc"},
	}
	for _, c := range cases {
		if got := sanitize(c.in); got != c.want {
			t.Errorf("sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := clip("héllo", 2); got != "h…" {
		t.Errorf("clip split a rune: %q", got)
	}
	if got := clip("abc", 5); got != "abc" {
		t.Errorf("clip changed a short string: %q", got)
	}
}
