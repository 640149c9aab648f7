package sanitize

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
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := Clip("héllo", 2); got != "h…" {
		t.Errorf("clip split a rune: %q", got)
	}
	if got := Clip("abc", 5); got != "abc" {
		t.Errorf("clip changed a short string: %q", got)
	}
}

func TestJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"n":9007199254740993,"f":1.50}`, `{"n":9007199254740993,"f":1.50}`},
		{`{"t":"x\u001b[31my","k\u0007":["\u202eb"]}`, `{"k":["b"],"t":"xy"}`},
		{`"plain \u0000string"`, `"plain string"`},
		{`{"big":12345678901234567890123,"s":"é\n"}`, `{"big":12345678901234567890123,"s":"é\n"}`},
	}
	for _, c := range cases {
		got, err := JSON([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("JSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := JSON([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}
