package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func adminServer(t *testing.T, s Store) *httptest.Server {
	t.Helper()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := AdminHandler(s, AdminOptions{
		PerUser: func(u string) bool { return u == "orders" },
		Known:   func(u string) bool { return u == "orders" || u == "crm" },
		Now:     func() time.Time { return now },
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func adminCall(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s %s: no Cache-Control: no-store", method, path)
	}
	return resp.StatusCode, b.String()
}

// TestAdminSetListRevoke: PUT stores a per_user secret as the operator's, GET lists entries and never
// the secret, DELETE revokes every kind of one principal at one upstream (or the kind named), and
// nobody else's.
func TestAdminSetListRevoke(t *testing.T) {
	s := &Memory{}
	srv := adminServer(t, s)
	code, body := adminCall(t, srv, http.MethodPut, "/v1/credentials/orders/alice%40example.com", `{"secret": "sk-alice-1234", "expires": "2027-01-01T00:00:00Z"}`)
	if code != http.StatusOK || body != `{"principal":"alice@example.com","upstream":"orders","kind":"secret","updated":"2026-12-01T12:00:00Z","expires":"2027-01-01T00:00:00Z","source":"operator"}`+"\n" {
		t.Fatalf("PUT: %d %s", code, body)
	}
	got, e, err := s.Get(context.Background(), Key{Principal: "alice@example.com", Upstream: "orders", Kind: Secret})
	if err != nil || string(got) != "sk-alice-1234" || e.Source != "operator" {
		t.Fatalf("stored: %q %+v %v", got, e, err)
	}
	_ = s.Put(context.Background(), Entry{Key: Key{Principal: "alice@example.com", Upstream: "orders", Kind: OAuth}}, []byte("tok"))
	_ = s.Put(context.Background(), Entry{Key: Key{Principal: "bob", Upstream: "orders", Kind: Secret}}, []byte("sk-bob"))
	code, body = adminCall(t, srv, http.MethodGet, "/v1/credentials?principal=alice%40example.com", "")
	var list ListResponse
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Credentials) != 2 || strings.Contains(body, "sk-alice") {
		t.Fatalf("GET: %d %s", code, body)
	}
	if code, body := adminCall(t, srv, http.MethodDelete, "/v1/credentials/orders/alice%40example.com?kind=oauth", ""); code != http.StatusOK ||
		!strings.Contains(body, `"kind":"oauth"`) || strings.Contains(body, `"kind":"secret"`) {
		t.Fatalf("DELETE ?kind=oauth: %d %s", code, body)
	}
	if code, body := adminCall(t, srv, http.MethodDelete, "/v1/credentials/orders/alice%40example.com", ""); code != http.StatusOK || !strings.Contains(body, `"kind":"secret"`) {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if l, _ := s.List(context.Background(), Filter{}); len(l) != 1 || l[0].Principal != "bob" {
		t.Fatalf("after alice's revoke the vault holds %+v, want bob's only", l)
	}
}

// TestAdminRefusals: each hostile or mistaken request gets a precise answer, and none echoes a secret.
func TestAdminRefusals(t *testing.T) {
	srv := adminServer(t, &Memory{})
	for _, c := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"set for an oauth upstream", http.MethodPut, "/v1/credentials/crm/alice", `{"secret": "hunter2"}`, 404, `no upstream \"crm\" with auth mode per_user`},
		{"set for an unknown upstream", http.MethodPut, "/v1/credentials/nope/alice", `{"secret": "hunter2"}`, 404, `no upstream \"nope\"`},
		{"not JSON", http.MethodPut, "/v1/credentials/orders/alice", `secret=hunter2`, 400, `expected a JSON body {\"secret\": \"…\"`},
		{"an unknown field", http.MethodPut, "/v1/credentials/orders/alice", `{"secret": "hunter2", "kind": "oauth"}`, 400, "expected a JSON body"},
		{"an empty secret", http.MethodPut, "/v1/credentials/orders/alice", `{"secret": ""}`, 400, "the secret is empty"},
		{"a header injection", http.MethodPut, "/v1/credentials/orders/alice", `{"secret": "hunter2\r\nX-Admin: 1"}`, 400, "control character at byte 8"},
		{"expired already", http.MethodPut, "/v1/credentials/orders/alice", `{"secret": "hunter2", "expires": "2020-01-01T00:00:00Z"}`, 400, "expires is in the past"},
		{"a principal with a newline", http.MethodPut, "/v1/credentials/orders/al%0Aice", `{"secret": "hunter2"}`, 400, "the principal holds a control character"},
		{"a principal too long", http.MethodPut, "/v1/credentials/orders/" + strings.Repeat("a", 300), `{"secret": "hunter2"}`, 400, "expected a principal of 1 to 256 bytes"},
		{"an unknown kind to list", http.MethodGet, "/v1/credentials?kind=password", "", 400, `unknown kind \"password\"`},
		{"an unknown kind to revoke", http.MethodDelete, "/v1/credentials/orders/alice?kind=password", "", 400, `unknown kind \"password\"`},
		{"revoke at an upstream that keeps none", http.MethodDelete, "/v1/credentials/plain/alice", "", 404, "that keeps credentials per user"},
		{"revoke nothing", http.MethodDelete, "/v1/credentials/orders/alice", "", 404, `no credential of \"alice\" is stored for \"orders\"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := adminCall(t, srv, c.method, c.path, c.body)
			if code != c.code || !strings.Contains(body, c.want) {
				t.Errorf("%d %s; want %d and %q", code, body, c.code, c.want)
			}
			if strings.Contains(body, "hunter2") {
				t.Errorf("the answer echoes the secret: %s", body)
			}
		})
	}
}

// failing is a store whose every operation fails, as Redis down.
type failing struct{ Memory }

func (*failing) List(context.Context, Filter) ([]Entry, error) { return nil, ErrNotFound }
func (*failing) Put(context.Context, Entry, []byte) error      { return context.DeadlineExceeded }

// TestAdminStoreFailure: a failing store answers 503 with Retry-After, never an empty list.
func TestAdminStoreFailure(t *testing.T) {
	srv := adminServer(t, &failing{})
	if code, body := adminCall(t, srv, http.MethodGet, "/v1/credentials", ""); code != 503 || !strings.Contains(body, "the credential store failed; nothing was listed") {
		t.Errorf("GET: %d %s", code, body)
	}
	if code, body := adminCall(t, srv, http.MethodPut, "/v1/credentials/orders/alice", `{"secret": "x"}`); code != 503 || !strings.Contains(body, "nothing was stored") {
		t.Errorf("PUT: %d %s", code, body)
	}
}
