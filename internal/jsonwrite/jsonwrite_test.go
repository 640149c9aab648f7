package jsonwrite

import (
	"encoding/json"
	"strings"
	"testing"
)

var stringSeeds = []string{"", "plain", "a\"b\\c/", "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>",
	"\u2028\u2029", "\xff\xfe", "\xe2\x80", "é日本🙂", "\xed\xa0\x80", "x\u2028y\xc0z"}

// AppendString quotes as json.Marshal does, byte for byte, StringLen
// counts exactly what it writes, and Quote sizes its buffer once.
func FuzzAppendString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[len("prefix"):], want)
		}
		if n := StringLen(s); n != len(want) {
			t.Fatalf("StringLen(%q) = %d, want %d", s, n, len(want))
		}
		if q := Quote(s); string(q) != string(want) || cap(q) != len(want) {
			t.Fatalf("Quote(%q) = %s (cap %d), want %s", s, q, cap(q), want)
		}
	})
}

var rawSeeds = []string{``, `null`, `{"ok":true,"data":"x"}`, " { \"a\" : [ 1 , 2.50 , \"<b>&\" ] }\n",
	`"\u2028 and ` + "\u2028\u2029" + `"`, `{"a":1}{"b":2}`, `{"a":`, `[1,2,]`, `"` + "\xff" + `"`, `  `, `1e400`,
	`{"deep":[[[["é"]]]]}`, "\t\"tab\"\t"}

// AppendRaw writes what json.Marshal writes for a json.RawMessage, and
// fails where it fails, appending nothing.
func FuzzAppendRaw(f *testing.F) {
	for _, s := range rawSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := json.Marshal(json.RawMessage(raw))
		if len(raw) == 0 {
			want, wantErr = []byte("null"), nil // as a nil RawMessage: AppendRaw takes empty for nil
		}
		got, err := AppendRaw([]byte("prefix"), raw)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendRaw(%q): error %v, json.Marshal's %v", raw, err, wantErr)
		}
		if err != nil {
			if string(got) != "prefix" {
				t.Fatalf("AppendRaw(%q) failed but appended %q", raw, got)
			}
			return
		}
		if string(got) != "prefix"+string(want) {
			t.Fatalf("AppendRaw(%q) = %s, want %s", raw, got[len("prefix"):], want)
		}
	})
}

// A large text is quoted into one buffer of its final size: one
// allocation, where json.Marshal grows a pooled buffer and copies out.
func TestQuoteAllocatesOnce(t *testing.T) {
	text := strings.Repeat("a line of a large result <with> markup & more\n", 1<<10)
	allocs := testing.AllocsPerRun(5, func() { _ = Quote(text) })
	if allocs != 1 {
		t.Fatalf("Quote of %d bytes: %v allocations, want 1", len(text), allocs)
	}
}

// AppendRaw compacts into buf's spare room: the answer is written where
// it will be sent from, not built in a buffer of its own and copied.
func TestAppendRawWritesIntoSpareRoom(t *testing.T) {
	raw := []byte(`{"ok": true, "data": "` + strings.Repeat("x", 1<<16) + `"}`)
	buf := append(make([]byte, 0, len(raw)+8), "prefix:"...)
	out, err := AppendRaw(buf, raw)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[:1][0] || string(out[len("prefix:"):]) != `{"ok":true,"data":"`+strings.Repeat("x", 1<<16)+`"}` {
		t.Fatalf("AppendRaw did not compact into buf's room (same array: %v)", &out[0] == &buf[:1][0])
	}
	// With something to escape for HTML, the result still ends in buf's
	// array (the compacted copy is the one taken aside).
	out, err = AppendRaw(buf, []byte(`{ "a": "<b>" }`))
	if err != nil || &out[0] != &buf[:1][0] || string(out) != `prefix:{"a":"\u003cb\u003e"}` {
		t.Fatalf("AppendRaw with HTML: %s, %v", out, err)
	}
}

func BenchmarkQuoteLarge(b *testing.B) {
	text := strings.Repeat("a line of a large result, plain text, as tools send\n", 100_000)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.Run("jsonwrite", func(b *testing.B) {
		for b.Loop() {
			_ = Quote(text)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(text)
		}
	})
}
