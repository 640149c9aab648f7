package shadow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/authz/shadow"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
)

// BenchmarkHandle is pipeline's BenchmarkHandle on a real policy (alice's orders/get, which no
// conditional line matches, so both decisions are memoized), without a shadow link, with the
// gateway's link and no shadow policy (what every gateway without authz.shadow_policy runs), with a
// shadow that agrees (the common case) and with one that disagrees (counted, logged nowhere here,
// and put on the audit record), so the shadow's cost per call is the difference.
//
//	go test ./authz/shadow -run XXX -bench Handle -benchmem -count 6
func BenchmarkHandle(b *testing.B) {
	e := newEnv(b)
	m := metrics.New()
	allowed := call("alice", "orders__get", `{"order_id":4821}`)
	denied := call("bob", "orders__small", `{}`) // the live policy denies it, the candidate allows it
	cases := []struct {
		name  string
		guard *shadow.Guard
		call  pipeline.Call
	}{
		{"allowed/no-link", nil, allowed},
		{"allowed/link-without-shadow", &shadow.Guard{}, allowed},
		{"allowed/shadow-agrees", &shadow.Guard{Policy: e.candidate.Current, Metrics: m}, allowed},
		{"denied/no-link", nil, denied},
		{"denied/shadow-disagrees", &shadow.Guard{Policy: e.candidate.Current, Metrics: m}, denied},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			c := e.chain(b, bc.guard, m, &discard{})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := c.Handle(ctx, bc.call); res.IsError != (bc.call.Name == denied.Name) {
					b.Fatal("unexpected outcome")
				}
			}
		})
	}
}

// BenchmarkDecide is what the shadow link adds to a call, on its own: the live decision (which
// conditions asks for anyway), and the live and the shadow decision, both memoized.
func BenchmarkDecide(b *testing.B) {
	e := newEnv(b)
	req := authz.Request{Subject: authz.Subject{Principal: "alice"}, Object: "orders/get", Action: authz.ActCall,
		Args: json.RawMessage(`{"order_id":4821}`)}
	live, cand := e.live.Current(), e.candidate.Current()
	b.Run("live", func(b *testing.B) {
		for b.Loop() {
			if !live.Decide(req).Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("live+shadow", func(b *testing.B) {
		for b.Loop() {
			if live.Decide(req).Allowed != cand.Decide(req).Allowed {
				b.Fatal("disagree")
			}
		}
	})
}
