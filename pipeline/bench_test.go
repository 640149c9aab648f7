package pipeline_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
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
