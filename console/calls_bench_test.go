package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
)

// callsConsole is a console over an audit trail holding n call records of a mix of principals,
// tools and outcomes, all kept in memory, with a session for carol whose cookie is returned.
func callsConsole(b *testing.B, n int) (*Console, *http.Cookie) {
	b.Helper()
	trail, err := audit.Open(audit.Options{Path: filepath.Join(b.TempDir(), "audit.log"), Fsync: audit.FsyncNever, KeepRecent: RecentCalls})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { trail.Close() })
	outcomes := []struct {
		d           audit.Decision
		code, stage string
		reason      string
	}{
		{audit.DecisionAllowed, "", "", "/etc/toolgate/policy.csv:2"},
		{audit.DecisionApprovalRequired, "approval_required", "approve", "/etc/toolgate/policy.csv:7"},
		{audit.DecisionDenied, "tool_not_allowed", "authorize", "no policy line allows it"},
		{audit.DecisionFailed, "tool_timeout", "execute", "deadline 30s passed"},
	}
	for i := range n {
		o := outcomes[i%len(outcomes)]
		rec := audit.Record{Kind: audit.KindCall, Principal: []string{"alice", "bob", "dave"}[i%3], Session: "mcp-session-4b1c0e6a",
			Tool: []string{"orders/get_order", "orders/refund_order", "orders/list_orders"}[i%3],
			Args: json.RawMessage(fmt.Sprintf(`{"order_id":%d,"amount":120}`, 4821+i)), Decision: o.d, ErrorCode: o.code,
			Stage: o.stage, Reason: o.reason, DurationMS: int64(i % 900), PolicyVersion: "3a7bd3e2360a"}
		if err := trail.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	base, _ := pendingConsole(b, 0) // no pending requests: this page is not about them
	o := base.o
	o.Pages = Pages{Recent: trail.Recent, Stages: chainStages, AuditPath: trail.Path()}
	c, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	id := randomToken()
	now := time.Now()
	if err := c.o.Sessions.Put(context.Background(), storeKey(id), Session{Approver: "carol", CSRF: randomToken(), Created: now, Expires: now.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	return c, &http.Cookie{Name: sessionCookie, Value: id}
}

// BenchmarkCallsPage renders the live calls page with 1,000 calls kept: decoding the kept lines,
// the filter, and the template. It reports the page's size, raw and gzipped.
func BenchmarkCallsPage(b *testing.B) {
	for _, query := range []string{"", "?principal=alice&outcome=denied"} {
		b.Run("calls=1000"+query, func(b *testing.B) {
			c, cookie := callsConsole(b, 1000)
			var body []byte
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/ui/calls"+query, nil)
				r.AddCookie(cookie)
				w := httptest.NewRecorder()
				c.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
				body = w.Body.Bytes()
			}
			zw := &countWriter{}
			gz := gzip.NewWriter(zw)
			_, _ = io.Copy(gz, bytes.NewReader(body))
			_ = gz.Close()
			b.ReportMetric(float64(len(body)), "page-bytes")
			b.ReportMetric(float64(zw.n), "gzip-bytes")
		})
	}
}
