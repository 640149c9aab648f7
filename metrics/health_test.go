package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// probe GETs url and returns the status and body.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	return resp.StatusCode, string(body)
}

// switchable is a check whose result the test sets.
type switchable struct {
	mu  sync.Mutex
	err error
}

func (s *switchable) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *switchable) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// TestReadinessFlips: /readyz follows its checks both ways, while /healthz stays 200 throughout.
func TestReadinessFlips(t *testing.T) {
	var h Health
	policy, audit := &switchable{}, &switchable{}
	h.AddReadiness("policy", policy.check)
	h.AddReadiness("audit", audit.check)
	mux := http.NewServeMux()
	mux.Handle("/healthz", h.Healthz())
	mux.Handle("/readyz", h.Readyz())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	steps := []struct {
		name          string
		policy, audit error
		status        int
		body          string
	}{
		{"all pass", nil, nil, 200, "ok\n"},
		{"audit fails", nil, errors.New("write failed: no space left on device"), 503, "audit: write failed: no space left on device\n"},
		{"both fail, in order added", errors.New("no policy loaded"), errors.New("sync failed"), 503, "policy: no policy loaded\naudit: sync failed\n"},
		{"recovered", nil, nil, 200, "ok\n"},
	}
	for _, st := range steps {
		policy.set(st.policy)
		audit.set(st.audit)
		if code, body := probe(t, srv.URL+"/readyz"); code != st.status || body != st.body {
			t.Errorf("%s: /readyz = %d %q, want %d %q", st.name, code, body, st.status, st.body)
		}
		if code, body := probe(t, srv.URL+"/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("%s: /healthz = %d %q, want 200 \"ok\\n\"", st.name, code, body)
		}
	}
}

// TestReadinessMessages: whatever a check returns, /readyz shows one short clean line of it, and a
// panicking check fails without showing its panic value.
func TestReadinessMessages(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name  string
		check func() error
		want  string
	}{
		{"stack cut to its first line", func() error {
			return errors.New("audit closed\ngoroutine 1 [running]:\nmain.go:12")
		}, "upstream/orders: audit closed\n"},
		{"control characters removed", func() error { return errors.New("down\x1b[31m red\x07") }, "upstream/orders: down red\n"},
		{"long message clipped", func() error { return errors.New(long) }, "upstream/orders: " + long[:200] + "…\n"},
		{"empty message", func() error { return errors.New("") }, "upstream/orders: failed\n"},
		{"panic", func() error { panic("/etc/secret/path") }, "upstream/orders: check panicked\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Health
			h.AddReadiness("upstream/orders", tt.check)
			rec := httptest.NewRecorder()
			h.Readyz().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != 503 || rec.Body.String() != tt.want {
				t.Errorf("/readyz = %d %q, want 503 %q", rec.Code, rec.Body.String(), tt.want)
			}
		})
	}
}

func TestAddReadinessRefuses(t *testing.T) {
	ok := func() error { return nil }
	tests := []struct {
		name  string
		check string
		fn    func() error
	}{
		{"empty name", "", ok},
		{"newline in name", "a\nb", ok},
		{"nil check", "audit", nil},
		{"duplicate", "policy", ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Health
			h.AddReadiness("policy", ok)
			defer func() {
				if recover() == nil {
					t.Errorf("AddReadiness(%q) did not panic", tt.check)
				}
			}()
			h.AddReadiness(tt.check, tt.fn)
		})
	}
}

// TestReadyWithoutChecks: the zero Health is ready.
func TestReadyWithoutChecks(t *testing.T) {
	var h Health
	rec := httptest.NewRecorder()
	h.Readyz().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != 200 || rec.Body.String() != "ok\n" {
		t.Errorf("/readyz = %d %q, want 200 \"ok\\n\"", rec.Code, rec.Body.String())
	}
}
