package console

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
)

// pendingConsole is a console over a store holding n pending refunds of alice, with a session for
// carol whose cookie is returned.
func pendingConsole(b *testing.B, n int) (*Console, *http.Cookie) {
	b.Helper()
	store, err := approvals.Open(filepath.Join(b.TempDir(), "approvals.json"), time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	pol := loadPolicy(b)
	rule, _ := pol.ApprovalRule(authz.Request{Subject: authz.Subject{Principal: "alice"}, Object: "orders/refund_order", Action: authz.ActCall})
	for i := range n {
		args := fmt.Sprintf(`{"amount":%d,"order_id":%d,"reason":"customer says the parcel arrived damaged <b>twice</b>"}`, 60+i%900, 4821+i)
		sum := sha256.Sum256([]byte(args))
		// Held by line 7 with its digest, as the gateway holds them: each row then costs the rule's
		// check and a policy decision, as in production.
		if _, _, err := store.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: hex.EncodeToString(sum[:]),
			Args: []byte(args), Rule: rule, RuleDigest: pol.ApprovalDigest(rule)}); err != nil {
			b.Fatal(err)
		}
	}
	c, err := New(Options{Store: store, Policy: func() *authz.Policy { return pol },
		Approvers: []Approver{{Name: "carol", KeySHA256: hashOf(carolKey)}},
		RuleText:  func(string) string { return "a, support_agent, orders/refund_order, call" }})
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

// BenchmarkApprovalsPage renders the approvals page with 1,000 pending requests: the store read,
// one policy decision per request, and the template. It reports the page's size, raw and gzipped.
func BenchmarkApprovalsPage(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			c, cookie := pendingConsole(b, n)
			var size int
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/ui/approvals", nil)
				r.AddCookie(cookie)
				w := httptest.NewRecorder()
				c.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
				size = w.Body.Len()
			}
			r := httptest.NewRequest(http.MethodGet, "/ui/approvals", nil)
			r.AddCookie(cookie)
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			zw := &countWriter{}
			gz := gzip.NewWriter(zw)
			_, _ = io.Copy(gz, w.Body)
			_ = gz.Close()
			b.ReportMetric(float64(size), "page-bytes")
			b.ReportMetric(float64(zw.n), "gzip-bytes")
		})
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }
