package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/redact"
)

// BenchmarkHandle measures the chain's own cost per call (resolve,
// authorize, validate, execute bookkeeping, normalize, record) with an
// upstream that answers at once.
func BenchmarkHandle(b *testing.B) {
	chain := pipelinetest.New(b, pipelinetest.Parts{})
	call := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := chain.Handle(ctx, call); res.IsError {
			b.Fatal("call failed")
		}
	}
}

// BenchmarkHandleLogged is BenchmarkHandle with the per-call log line, as
// the gateway writes it (JSON, to a writer that discards it).
func BenchmarkHandleLogged(b *testing.B) {
	rec := &pipeline.Recorder{Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	chain := pipelinetest.New(b, pipelinetest.Parts{Recorder: rec})
	call := pipeline.Call{Subject: pipelinetest.Alice, Session: "s-1", Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := chain.Handle(ctx, call); res.IsError {
			b.Fatal("call failed")
		}
	}
}

// BenchmarkChainLength measures the chain's cost per call as it grows:
// each chain is the one of BenchmarkHandle with n more links that only
// pass the call on, which is what a guard that does not apply costs.
//
//	go test ./pipeline -run XXX -bench ChainLength -benchmem
func BenchmarkChainLength(b *testing.B) {
	pass := pipeline.Step("pass", func(context.Context, *pipeline.Exchange) *envelope.Error { return nil })
	for _, n := range []int{0, 4, 16} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			guards := make([]pipeline.Link, n)
			for i := range guards {
				guards[i] = pass
			}
			chain := pipelinetest.New(b, pipelinetest.Parts{Guards: guards, Metrics: metrics.New()})
			call := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := chain.Handle(ctx, call); res.IsError {
					b.Fatal("call failed")
				}
			}
		})
	}
}

// BenchmarkRedaction is what the default redaction adds to a whole call:
// a typical 1 KB JSON result, a 1 MB one, each as text content and as
// structured content, with and without a redactor (issue 22 counts per-call
// cost). Neither holds a secret, as nearly no result does.
func BenchmarkRedaction(b *testing.B) {
	r, err := redact.New(redact.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1 << 10, 1 << 20} {
		rows := resultRows(size * 2 / 5) // twice, the text escaped: about size in all, under the 1 MiB default cap
		text, _ := json.Marshal(rows)
		raw := `{"content":[{"type":"text","text":` + string(text) + `}],"structuredContent":` + rows + `}`
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("%dKB/redact=%t", size>>10, on)
			b.Run(name, func(b *testing.B) {
				var redactor *redact.Redactor
				if on {
					redactor = r
				}
				benchmarkResult(b, raw, redactor)
			})
		}
	}
}

// resultRows is a JSON object of order rows, about n bytes, without secrets.
func resultRows(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"orders":[`)
	for i := 0; sb.Len() < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"order_id":%d,"status":"shipped","note":"left at the front door","url":"https://shop.example.com/orders/%d"}`, 4800+i, 4800+i)
	}
	sb.WriteString(`]}`)
	return sb.String()
}

// BenchmarkLargeText is a call whose result is one large plain text (512
// KiB: under the default 1 MiB cap), the shape of the large-results figure
// of bench/ (5 MiB texts), with the default redactor: what normalize costs
// per byte of result, in time and in copies.
func BenchmarkLargeText(b *testing.B) {
	r, err := redact.New(redact.Options{})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("a line of a large plain-text result, as a tool sends it.\n", 512<<10/58)
	quoted, _ := json.Marshal(text)
	raw := `{"content":[{"type":"text","text":` + string(quoted) + `}]}`
	benchmarkResult(b, raw, r)
}

// benchmarkResult measures whole calls whose upstream answers raw, with
// redactor r (nil: none), per byte of the result.
func benchmarkResult(b *testing.B, raw string, r *redact.Redactor) {
	chain := pipelinetest.New(b, pipelinetest.Parts{Upstreams: &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)}, Redact: r})
	call := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
	ctx := context.Background()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if res := chain.Handle(ctx, call); res.IsError {
			b.Fatalf("call failed: %+v", res.Content)
		}
	}
}
