package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams"
)

// A server already up when the gateway is built counts its first restart:
// toolgate_upstream_restarts_total is 1 after one exit, not 0 (the restart
// counter only learned a server was up from status changes, and a server up
// at boot reports none before its first exit).
func TestFirstRestartCounted(t *testing.T) {
	old := upstreams.DefaultBackoff
	upstreams.DefaultBackoff = upstreams.Backoff{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond, ResetAfter: time.Minute}
	t.Cleanup(func() { upstreams.DefaultBackoff = old })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	crashy := fmt.Sprintf(`  crashy:
    command: %q
    args: ["-name", "crashy", "-crash-after", "1"]
    env: {%s: "1", GORACE: "atexit_sleep_ms=0"}
`, self, upstreamRole)
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: writeGateway(t, "", crashy), Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	if up, why := gw.set.Status("crashy"); !up {
		t.Fatalf("crashy is not up after New: %s", why)
	}
	back := make(chan struct{}, 1)
	wentDown := false
	gw.set.OnStatusChange(func(server string, up bool, _ string) {
		if server != "crashy" {
			return
		}
		if !up {
			wentDown = true // the supervisor's goroutine calls back in order
		} else if wentDown {
			select {
			case back <- struct{}{}:
			default:
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := gw.set.CallTool(ctx, "crashy", "echo", []byte(`{}`)); err != nil {
		t.Fatalf("the call before the exit: %v", err)
	}
	select {
	case <-back:
	case <-ctx.Done():
		t.Fatal("crashy never came back after its exit")
	}
	if got := scrapeLine(t, gw, `toolgate_upstream_restarts_total{server="crashy"}`); got != "1" {
		t.Fatalf(`toolgate_upstream_restarts_total{server="crashy"} = %q after one exit, want 1`, got)
	}
}

// scrapeLine is the value of one series in the gateway's /metrics ("" if absent).
func scrapeLine(t *testing.T, gw *Gateway, series string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
