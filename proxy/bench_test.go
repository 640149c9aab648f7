package proxy

import (
	"context"
	"testing"
)

// BenchmarkHandle measures the pipeline's own cost per call (resolve,
// authorize, validate, execute bookkeeping, normalize) with an upstream that
// answers at once.
func BenchmarkHandle(b *testing.B) {
	p := newTestPipeline(&testing.T{}, &fakeUpstreams{fn: answer(okText)})
	call := Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := p.Handle(ctx, call); res.IsError {
			b.Fatal("call failed")
		}
	}
}
