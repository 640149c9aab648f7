package upstreams

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkConnCallTool is one tools/call through a Conn to the test
// upstream over stdio, 16 callers. "inline" gives each call a deadline, so
// it is written on the caller's goroutine (sendInline); "aside" gives none,
// so it runs on a goroutine of its own (send). cpu-ns/op is this process's
// CPU (the gateway's side) per call.
func BenchmarkConnCallTool(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{Name: "bench", Transport: TransportStdio, Command: exe, Args: []string{"-name", "bench"},
		Env: map[string]string{testUpstreamEnv: "1"}}
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	c, err := Dial(ctx, srv, 1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := json.RawMessage(`{"message":"ping"}`)
	for _, mode := range []string{"inline/c1", "aside/c1", "inline/c16", "aside/c16"} {
		b.Run(mode, func(b *testing.B) {
			if strings.HasSuffix(mode, "c16") {
				b.SetParallelism(8) // 16 callers on 2 CPUs
			} else {
				runtime.GOMAXPROCS(1) // one caller: RunParallel starts GOMAXPROCS goroutines
				defer runtime.GOMAXPROCS(runtime.NumCPU())
			}
			cpu := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					callCtx, stop := context.Background(), func() {}
					if strings.HasPrefix(mode, "inline") {
						callCtx, stop = context.WithTimeout(callCtx, time.Minute)
					}
					_, err := c.CallTool(callCtx, "echo", args)
					stop()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
