package redact

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/redact/redacttest"
)

// typicalResult is JSON text as a tool returns it, about n bytes, with no
// secret: what nearly every result is.
func typicalResult(n int) string {
	var b strings.Builder
	b.WriteString(`{"orders":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"order_id":%d,"status":"shipped","customer":"Customer %d","note":"left at the front door, signed by the neighbour","url":"https://shop.example.com/orders/%d"}`, 4800+i, i, 4800+i)
	}
	b.WriteString(`]}`)
	return b.String()
}

func benchString(b *testing.B, text string) {
	r, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		r.String(text)
	}
}

func BenchmarkString1KB(b *testing.B) { benchString(b, typicalResult(1<<10)) }
func BenchmarkString1MB(b *testing.B) { benchString(b, typicalResult(1<<20)) }
func BenchmarkString1KBWithSecret(b *testing.B) {
	benchString(b, typicalResult(1<<10)+redacttest.Samples()[2].Text)
}
func BenchmarkString1MBWithSecret(b *testing.B) {
	benchString(b, typicalResult(1<<20)+redacttest.Samples()[2].Text)
}

func benchJSON(b *testing.B, raw []byte) {
	r, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.JSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSON1KB(b *testing.B) { benchJSON(b, []byte(typicalResult(1<<10))) }
func BenchmarkJSON1MB(b *testing.B) { benchJSON(b, []byte(typicalResult(1<<20))) }
