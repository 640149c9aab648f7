package sanitize

import (
	"testing"
	"unicode/utf8"
)

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

// Zero-width and tag characters show nothing and a model reads them: they
// are dropped, except a zero-width joiner that joins two emoji (see
// keepJoiner).
func TestSanitizeInvisible(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"zero-width space", "ig\u200bnore", "ignore"},
		{"zero-width non-joiner", "a\u200cb", "ab"},
		{"joiner between letters", "a\u200db", "ab"},
		{"joiner at the ends", "\u200dab\u200d", "ab"},
		{"left-to-right and right-to-left marks", "a\u200eb\u200fc", "abc"},
		{"word joiner", "a\u2060b", "ab"},
		{"BOM at the start", "\ufeff{\"a\":1}", "{\"a\":1}"},
		{"BOM inside", "a\ufeffb", "ab"},
		{"tag characters", "ok\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065\U000E007F!", "ok!"},
		{"subdivision flag loses its tags", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "\U0001F3F4"},
		{"family emoji keeps its joiners", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F468\u200d\U0001F469\u200d\U0001F467"},
		{"skin tone and variation selector before a joiner", "\U0001F469\U0001F3FD\u200d\U0001F4BB \u2764\ufe0f\u200d\U0001F525", "\U0001F469\U0001F3FD\u200d\U0001F4BB \u2764\ufe0f\u200d\U0001F525"},
		{"joiner to a symbol emoji", "\U0001F9D1\u200d\u2695\ufe0f \U0001F408\u200d\u2B1B", "\U0001F9D1\u200d\u2695\ufe0f \U0001F408\u200d\u2B1B"},
		{"run of joiners between emoji", "\U0001F600\u200d\u200d\u200d\U0001F600", "\U0001F600\U0001F600"},
		{"joiner after an emoji, before a letter", "\U0001F600\u200da", "\U0001F600a"},
		{"joiner hidden after a stripped character", "\U0001F600\u200b\u200d\U0001F600", "\U0001F600\U0001F600"},
		{"joiner before an emoji behind a stripped character", "\U0001F600\u200d\u200b\U0001F600", "\U0001F600\U0001F600"},
	}
	for _, c := range cases {
		if got := Text(c.in); got != c.want {
			t.Errorf("%s: Text(%+q) = %+q, want %+q", c.name, c.in, got, c.want)
		}
	}
}

func TestSanitizeInvisibleJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"no\u200bte":"de\u2060livered"}`, `{"note":"delivered"}`},
		{"{\"no\u200bte\":[\"\ufeffx\"]}", `{"note":["x"]}`},
		{`{"k":"a\udb40\udc69\udb40\udc7fb"}`, `{"k":"ab"}`},
		{`"\ud83d\udc68\u200d\ud83d\udc69"`, "\"\U0001F468\u200d\U0001F469\""},
		{`{"a":"\u00e9\n\t\"\/x"}`, `{"a":"\u00e9\n\t\"\/x"}`}, // nothing to clean: returned as is
		{`{"a":"x\ry\u0085z\u202e"}`, `{"a":"xyz"}`},
		{`{"a":"\uFEFFx"}`, `{"a":"x"}`},
	}
	for _, c := range cases {
		got, err := JSON([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("JSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	// Keys that clean to one key: the visible one wins, else the first in
	// byte order, whatever the map order.
	for i := 0; i < 20; i++ {
		for in, want := range map[string]string{
			`{"no\u200bte":"b","note":"a","n\u200bote":"c"}`:       `{"note":"a"}`,
			`{"n\u200bote":"c","no\u200bte":"b","n\u0007ote":"d"}`: `{"note":"d"}`,
		} {
			if got, err := JSON([]byte(in)); err != nil || string(got) != want {
				t.Fatalf("JSON(%s) = %s, %v; want %s", in, got, err, want)
			}
		}
	}
	if got := Clip(Text("ab\u200bcd"), 3); got != "abc…" {
		t.Errorf("Clip(Text(...)) = %+q", got)
	}
}

// Text is idempotent, its output is valid UTF-8 without controls (but tab
// and newline), bidi, zero-width or tag characters, except a zero-width
// joiner directly between two emoji, and clean texts joined by a newline
// are clean (as the pipeline joins a result's text blocks for its data).
func FuzzText(f *testing.F) {
	for _, s := range []string{"plain", "a\x1b[31mb", "\U0001F468\u200d\U0001F469", "\U0001F600\u200d\u200b\U0001F600",
		"x\U000E0041\u202e\ufeff\r\n", "\xff\u200d\U0001F600", "\U0001F600\u200d\x1b]0;t\x07\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if again := Text(got); again != got {
			t.Fatalf("Text(%+q) = %+q, but Text of that is %+q", s, got, again)
		}
		joined := Text(s[:len(s)/2]) + "\n" + Text(s[len(s)/2:])
		if again := Text(joined); again != joined {
			t.Fatalf("clean texts joined, %+q, are not clean: Text gives %+q", joined, again)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%+q) = %+q: invalid UTF-8", s, got)
		}
		var prev rune
		for i, r := range got {
			bad := r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) || Bidi(r) || Invisible(r)
			if r == zeroWidthJoiner {
				next, _ := utf8.DecodeRuneInString(got[i+utf8.RuneLen(r):])
				bad = !joinsEmoji(prev, next)
			}
			if bad {
				t.Fatalf("Text(%+q) = %+q keeps %U", s, got, r)
			}
			prev = r
		}
	})
}
