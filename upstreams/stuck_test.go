package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// A child that stops reading its input is declared down once, however many
// calls meet its blocked input at their deadlines, on the inline path and on
// the goroutine path that calls with progress take. Every call ends as its
// deadline or as not sent, never as sent and lost; the log says it once.
func TestChildThatStopsReadingIsDeclaredDownOnce(t *testing.T) {
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<19) + `"}`) // far more than a 64 KiB pipe buffer
	for _, progress := range []bool{false, true} {
		name := map[bool]string{false: "inline", true: "progress"}[progress]
		t.Run(name, func(t *testing.T) {
			h := start(t, servers(stdioServer(t, "s")))
			mustCall(t, h.set, "s", "stop_reading", `{}`)
			const calls = 4
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					defer cancel()
					if progress {
						_, errs[i] = h.set.CallToolProgress(ctx, "s", "echo", big, func(Progress) {})
					} else {
						_, errs[i] = h.set.CallTool(ctx, "s", "echo", big)
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				var ce *CallError
				if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ce) && ce.Where == NotSent) {
					t.Errorf("call %d: %v, want the deadline or not sent", i, err)
				}
			}
			h.waitStatus(t, "s", false)
			if n := strings.Count(h.logs.String(), "stopped reading its input; stopping it"); n != 1 {
				t.Fatalf("declared stuck %d times, want once; log:\n%s", n, h.logs)
			}
		})
	}
}
