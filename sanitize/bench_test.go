package sanitize

import (
	"strings"
	"testing"
)

// Every call's result passes through Text and JSON: these measure the
// common case (plain text, plain JSON), text that is mostly non-ASCII, and
// text that needs cleaning.
var (
	benchPlain   = strings.Repeat("Order 42 shipped to Berlin on 2026-01-05; status: delivered.\n", 64)
	benchUnicode = strings.Repeat("Bestellung 42 → versandt nach Köln 📦 am 5. Januar; Status: zugestellt ✅.\n", 64)
	benchDirty   = strings.Repeat("Order \x1b[31m42\x1b[0m shipped\u200b to\u202e Berlin\U000E0041 status: ok.\n", 64)
	benchJSON    = []byte(`{"orders":[` + strings.Repeat(`{"id":42,"status":"shipped","customer":"Ada Lovelace","total":"19.99","items":["book","pen"]},`, 31) + `{"id":1}]}`)
	benchJSONU   = []byte(`{"orders":[` + strings.Repeat(`{"id":42,"status":"versandt","kunde":"Jürgen Müller","summe":"19,99 €","artikel":["Buch","Füller"]},`, 31) + `{"id":1}]}`)
)

func BenchmarkText(b *testing.B) {
	for _, c := range []struct{ name, s string }{{"plain", benchPlain}, {"unicode", benchUnicode}, {"dirty", benchDirty}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = Text(c.s)
			}
		})
	}
}

func BenchmarkJSON(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"plain", benchJSON}, {"unicode", benchJSONU}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := JSON(c.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
