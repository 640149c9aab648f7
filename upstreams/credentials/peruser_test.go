package credentials

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

func as(principal string) context.Context {
	return asCaller(context.Background(), Caller{Principal: principal})
}

func perUser(t *testing.T, o PerUserOptions) *PerUserSource {
	t.Helper()
	o.Server, o.Caller = "orders", callerFrom
	s, err := NewPerUser(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putSecret(t *testing.T, v vault.Store, principal, secret string, expires time.Time) {
	t.Helper()
	e := vault.Entry{Key: vault.Key{Principal: principal, Upstream: "orders", Kind: vault.Secret}, Expires: expires, Source: "operator"}
	if err := v.Put(context.Background(), e, []byte(secret)); err != nil {
		t.Fatal(err)
	}
}

// TestPerUserGivesEachCallerTheirOwnSecret: each caller's request carries their own secret, in the
// configured header and format; a caller with none (or an expired one) is answered
// authorization_required with the connect URL, or the operator command without one.
func TestPerUserGivesEachCallerTheirOwnSecret(t *testing.T) {
	v := &vault.Memory{}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	putSecret(t, v, "alice", "alice-key", time.Time{})
	putSecret(t, v, "bob", "bob-key", now.Add(time.Hour))
	putSecret(t, v, "old", "old-key", now.Add(-time.Second))
	s := perUser(t, PerUserOptions{Vault: v, Header: "X-Api-Key", Format: "Token {secret}", Now: func() time.Time { return now },
		ConnectURL: func(p, u string) string { return "https://gw.example/connect/" + u + "?as=" + p }})
	if s.HeaderName() != "X-Api-Key" {
		t.Fatalf("HeaderName = %q", s.HeaderName())
	}
	for p, want := range map[string]string{"alice": "Token alice-key", "bob": "Token bob-key"} {
		if got, err := s.Authorization(as(p)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"carol", "old"} {
		_, err := s.Authorization(as(p))
		var ar *AuthorizationRequiredError
		if !errors.As(err, &ar) || ar.Rejected {
			t.Fatalf("%s: %v, want an AuthorizationRequiredError", p, err)
		}
		msg := ar.AuthorizationRequired()
		if want := `server "orders" acts as you, and holds no secret of yours yet; open https://gw.example/connect/orders?as=` + p +
			" in a browser to connect, then repeat the call"; msg != want {
			t.Errorf("%s: message %q, want %q", p, msg, want)
		}
	}
	bare := perUser(t, PerUserOptions{Vault: v})
	if got, _ := bare.Authorization(as("alice")); got != "Bearer alice-key" || bare.HeaderName() != "Authorization" {
		t.Errorf("the defaults: %s: %q, want Authorization: Bearer alice-key", bare.HeaderName(), got)
	}
	_, err := bare.Authorization(as("carol"))
	var ar *AuthorizationRequiredError
	if !errors.As(err, &ar) || !strings.Contains(ar.AuthorizationRequired(), "ask an operator to set it (toolgate credentials set)") {
		t.Errorf("without a connect page: %v", err)
	}
}

// TestPerUserGatewayRequests: a request no caller made carries the service secret when one is
// configured, and no header at all otherwise.
func TestPerUserGatewayRequests(t *testing.T) {
	if got, err := perUser(t, PerUserOptions{Vault: &vault.Memory{}}).Authorization(context.Background()); got != "" || err != nil {
		t.Errorf("without a service secret: %q, %v; want no header", got, err)
	}
	if got, err := perUser(t, PerUserOptions{ServiceSecret: "svc"}).Authorization(context.Background()); got != "Bearer svc" || err != nil {
		t.Errorf("with a service secret: %q, %v", got, err)
	}
}

// TestPerUserRejected: the upstream's 401 to a caller's secret asks that caller for a new one; to the
// gateway's own request it is let through.
func TestPerUserRejected(t *testing.T) {
	s := perUser(t, PerUserOptions{})
	var ar *AuthorizationRequiredError
	if err := s.RejectedError(as("alice")); !errors.As(err, &ar) || !ar.Rejected ||
		!strings.Contains(ar.AuthorizationRequired(), "refused the secret stored for you (revoked or replaced)") {
		t.Errorf("RejectedError(alice) = %v", err)
	}
	if err := s.RejectedError(context.Background()); err != nil {
		t.Errorf("RejectedError(gateway) = %v, want nil", err)
	}
}

// failingStore fails every read, as a store that cannot be reached.
type failingStore struct{ vault.Memory }

func (*failingStore) Get(context.Context, vault.Key) ([]byte, vault.Entry, error) {
	return nil, vault.Entry{}, errors.New("redis: connection refused")
}

// TestPerUserStoreFailure: a store that fails is not a missing secret: the request is not sent and
// the error is a plain credential error (upstream_unavailable), not authorization_required, and a
// stored secret that could not go in a header is never sent.
func TestPerUserStoreFailure(t *testing.T) {
	_, err := perUser(t, PerUserOptions{Vault: &failingStore{}}).Authorization(as("alice"))
	var e *Error
	var ar *AuthorizationRequiredError
	if !errors.As(err, &e) || errors.As(err, &ar) || !strings.Contains(err.Error(), "the credential store: redis: connection refused") {
		t.Errorf("a failing store: %v", err)
	}
	v := &vault.Memory{}
	putSecret(t, v, "alice", "a\r\nX-Injected: 1", time.Time{})
	if got, err := perUser(t, PerUserOptions{Vault: v}).Authorization(as("alice")); err == nil || got != "" {
		t.Errorf("a secret with a newline: %q, %v; want an error", got, err)
	}
}

func TestNewPerUserRefusesABadFormat(t *testing.T) {
	for _, f := range []string{"Bearer", "{secret}{secret}"} {
		if _, err := NewPerUser(PerUserOptions{Server: "orders", Caller: callerFrom, Format: f}); err == nil {
			t.Errorf("format %q accepted", f)
		}
	}
}
