package audit

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// BenchmarkAppend measures one realistic call record per policy on the
// real file system, one writer at a time and with many at once (where
// fsync: always shares each fsync among the records written meanwhile).
func BenchmarkAppend(b *testing.B) {
	r := Record{Kind: KindCall, Principal: "alice", Session: "3f9c2e4a-7d1b-4c55-9a0e-1b2c3d4e5f60",
		Tool: "orders/update_order_status", Args: json.RawMessage(`{"order_id":4821,"status":"shipped"}`),
		Decision: DecisionAllowed, Attempts: 1, DurationMS: 12, PolicyVersion: "3a7bd3e2360a"}
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		for _, parallel := range []bool{false, true} {
			name := string(policy)
			if parallel {
				name += "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				l, err := Open(Options{Path: filepath.Join(b.TempDir(), "audit.log"), Fsync: policy})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.ReportAllocs()
				if !parallel {
					for b.Loop() {
						if err := l.Append(r); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(16) // 16 x GOMAXPROCS writers, like a busy gateway
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := l.Append(r); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
