package proxy

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/metrics"
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

// BenchmarkStage measures each pipeline stage alone, in order, on a call
// the earlier stages have prepared (allocations per stage included):
//
//	go test ./proxy -run XXX -bench Stage -benchmem
func BenchmarkStage(b *testing.B) {
	p := newTestPipeline(&testing.T{}, &fakeUpstreams{fn: answer(okText)})
	p.Metrics = metrics.New()
	ctx := context.Background()
	call := Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)}
	x := &exchange{call: call, started: p.now(), policy: p.policySnapshot()}
	for _, st := range stages {
		prepared := *x
		b.Run(st.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				y := prepared
				if err := p.runStage(ctx, st, &y); err != nil {
					b.Fatalf("%s: %v", st.name, err)
				}
			}
		})
		if err := p.runStage(ctx, st, x); err != nil {
			b.Fatalf("%s: %v", st.name, err)
		}
		if x.finished {
			break // deduplicate ran the rest
		}
	}
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.record(x)
		}
	})
}
