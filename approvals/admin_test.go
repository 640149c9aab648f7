package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

const adminKey = "tg_admin_secret"

func adminServer(t *testing.T) (*FileStore, *httptest.Server) {
	t.Helper()
	s, _, _ := open(t)
	sum := sha256.Sum256([]byte(adminKey))
	srv := httptest.NewServer(Handler(s, hex.EncodeToString(sum[:]), nil))
	t.Cleanup(srv.Close)
	return s, srv
}

func TestAdminUnauthorized(t *testing.T) {
	_, srv := adminServer(t)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + adminKey, "Bearer "} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/approvals", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%q: %d %q, want 401 with WWW-Authenticate", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Error("CORS header sent")
		}
	}
	c := &Client{URL: srv.URL, Key: "wrong", HTTP: srv.Client()}
	var apiErr *APIError
	if _, err := c.List(context.Background()); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("client with a wrong key: %v", err)
	}
}

func TestAdminNoKeyConfigured(t *testing.T) {
	s, _, _ := open(t)
	srv := httptest.NewServer(Handler(s, "", nil))
	defer srv.Close()
	c := &Client{URL: srv.URL, Key: "", HTTP: srv.Client()}
	var apiErr *APIError
	if _, err := c.List(context.Background()); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("got %v, want 401", err)
	}
}

func TestAdminListApproveDeny(t *testing.T) {
	s, srv := adminServer(t)
	ctx := context.Background()
	c := &Client{URL: srv.URL + "/", Key: adminKey, HTTP: srv.Client()}
	p := check(t, s, "h1", Pending)
	q := check(t, s, "h2", Pending)

	list, err := c.List(ctx, StatePending)
	if err != nil || len(list) != 2 || list[0].ID != p.ID || string(list[0].Args) != string(args) {
		t.Fatalf("List = %+v, %v", list, err)
	}

	a, err := c.Approve(ctx, p.ID, "carol")
	if err != nil || a.State != StateApproved || a.DecidedBy != "carol" {
		t.Fatalf("Approve = %+v, %v", a, err)
	}
	d, err := c.Deny(ctx, q.ID, "", "no")
	if err != nil || d.State != StateDenied || d.Reason != "no" || d.DecidedBy != "admin" {
		t.Fatalf("Deny = %+v, %v", d, err)
	}
	check(t, s, "h1", Proceed)
	check(t, s, "h2", Denied)

	if list, err = c.List(ctx, StatePending); err != nil || len(list) != 0 {
		t.Errorf("pending after decisions = %+v, %v", list, err)
	}
	if list, err = c.List(ctx); err != nil || len(list) != 2 {
		t.Errorf("all = %+v, %v", list, err)
	}

	var apiErr *APIError
	if _, err := c.Approve(ctx, "apr_unknown", ""); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("unknown id: %v, want 404", err)
	}
	if _, err := c.Approve(ctx, p.ID, ""); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("approve used: %v, want 409", err)
	}
	if _, err := c.Deny(ctx, q.ID, "", ""); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("deny denied: %v, want 409", err)
	}
}

func TestAdminBadRequests(t *testing.T) {
	s, srv := adminServer(t)
	p := check(t, s, "h1", Pending)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown state", "GET", "/v1/approvals?state=open", "", 400},
		{"bad JSON", "POST", "/v1/approvals/" + p.ID + "/approve", "{", 400},
		{"unknown field", "POST", "/v1/approvals/" + p.ID + "/deny", `{"reasn":"x"}`, 400},
		{"body too large", "POST", "/v1/approvals/" + p.ID + "/deny", `{"reason":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413},
		{"wrong method", "DELETE", "/v1/approvals", "", 405},
		{"unknown path", "GET", "/v1/other", "", 404},
		{"empty body approves", "POST", "/v1/approvals/" + p.ID + "/approve", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// unreachable is a Store whose List fails as a shared store that cannot be reached does.
type unreachable struct{ Store }

func (unreachable) List(...State) ([]Request, error) {
	return nil, fmt.Errorf("%w: dial tcp 127.0.0.1:6379: connect: connection refused", ErrUnavailable)
}

// A list the store cannot answer is never an empty list: 503 with Retry-After while a shared store
// is unreachable (as for approve and deny), 500 for a damaged approvals file, and the client reports
// the error, never a list.
func TestAdminListStoreFailures(t *testing.T) {
	s, _, path := open(t)
	check(t, s, "h1", Pending)
	sum := sha256.Sum256([]byte(adminKey))
	srv := httptest.NewServer(Handler(unreachable{s}, hex.EncodeToString(sum[:]), nil))
	defer srv.Close()
	c := &Client{URL: srv.URL, Key: adminKey, HTTP: srv.Client()}
	var apiErr *APIError
	if list, err := c.List(context.Background(), StatePending); !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable ||
		!strings.Contains(apiErr.Msg, "unavailable") || list != nil {
		t.Errorf("list from an unreachable store: %+v, %v", list, err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET /v1/approvals from an unreachable store: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	fileSrv := httptest.NewServer(Handler(s, hex.EncodeToString(sum[:]), nil))
	defer fileSrv.Close()
	c.URL = fileSrv.URL
	if err := os.WriteFile(path, []byte(`{"version": 1, "requests": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	if list, err := c.List(context.Background()); !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || list != nil {
		t.Errorf("list from a damaged file: %+v, %v", list, err)
	}
}
