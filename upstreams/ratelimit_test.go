package upstreams

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/breaker"
)

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in    string
		after time.Duration
		named bool
	}{
		{"", 0, false},
		{"1", time.Second, true},
		{" 30 ", 30 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"999999999999", maxRetryAfter * time.Second, true},
	} {
		after, named := retryAfter(c.in, now)
		if after != c.after || named != c.named {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", c.in, after, named, c.after, c.named)
		}
	}
}

// A POST answered 429 (or 503 with Retry-After) fails with a RateLimitedError
// that breaker.Classify calls RateLimited; a 503 without it, a GET, and any
// other status pass through unchanged.
func TestCappedTransportRateLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("ra"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		code := http.StatusOK
		switch r.URL.Query().Get("s") {
		case "429":
			code = http.StatusTooManyRequests
		case "503":
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(strings.Repeat("x", 10000)))
	}))
	defer srv.Close()
	c := &http.Client{Transport: &cappedTransport{base: http.DefaultTransport, max: 1 << 20}}
	for _, tc := range []struct {
		method, query string
		limited       bool
		after         time.Duration
	}{
		{http.MethodPost, "s=429&ra=1", true, time.Second},
		{http.MethodPost, "s=429", true, 0},
		{http.MethodPost, "s=503&ra=2", true, 2 * time.Second},
		{http.MethodPost, "s=503", false, 0},
		{http.MethodPost, "ra=1", false, 0},
		{http.MethodGet, "s=429&ra=1", false, 0},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/?"+tc.query, nil)
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		after, limited := breaker.RetryAfter(err)
		if limited != tc.limited || after != tc.after {
			t.Errorf("%s %s: rate limited %v after %s (err %v); want %v after %s", tc.method, tc.query, limited, after, err, tc.limited, tc.after)
		}
		if tc.limited {
			ce := &CallError{Where: NotSent, Err: err}
			if o := breaker.Classify(context.Background(), ce); o != breaker.RateLimited {
				t.Errorf("%s %s: classified %s, want rate_limited", tc.method, tc.query, o)
			}
			var rl *RateLimitedError
			if !errors.As(ce, &rl) || !strings.Contains(ce.Error(), "HTTP") {
				t.Errorf("%s %s: %v does not carry the status", tc.method, tc.query, ce)
			}
		}
	}
}
