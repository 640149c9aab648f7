package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/credentials/vault/vaulttest"
)

func TestBackendContract(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "t:")
	vaulttest.Backend(t, New(c))
}

func keyring(t *testing.T) *vault.Keyring {
	t.Helper()
	k, _ := vault.NewKey()
	r, err := vault.LoadKeyring(vault.KeySource{Env: "K", LookupEnv: func(string) (string, bool) { return k, true }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSharedByReplicas: a secret stored through one replica is read through another, Redis holds it
// only sealed, a revoke through the second holds on the first at once, and a rekey runs against
// Redis's copy.
func TestSharedByReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	keys := keyring(t)
	ra, rb := vault.NewEncrypted(New(a), keys), vault.NewEncrypted(New(b), keys)
	ctx := context.Background()
	alice := vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}
	if err := ra.Put(ctx, vault.Entry{Key: alice, Source: "operator"}, []byte("alice-very-secret")); err != nil {
		t.Fatal(err)
	}
	if got, e, err := rb.Get(ctx, alice); err != nil || string(got) != "alice-very-secret" || e.Source != "operator" {
		t.Fatalf("the other replica read %q, %+v, %v", got, e, err)
	}
	raw, err := a.Redis().HGetAll(ctx, "t:cred:records").Result()
	if err != nil || len(raw) != 1 {
		t.Fatalf("the hash: %v, %v", raw, err)
	}
	for f, v := range raw {
		if strings.Contains(f+v, "very-secret") {
			t.Fatal("Redis holds the secret in clear")
		}
	}
	if err := rb.Delete(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ra.Get(ctx, alice); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("after a revoke through the other replica: %v, want ErrNotFound", err)
	}
	_ = ra.Put(ctx, vault.Entry{Key: alice}, []byte("x"))
	rotated, _ := vault.NewKeyring(mustKey(t), mustKey(t)) // the old key lost: the record is reported, left as it is
	if rep, err := vault.NewEncrypted(New(b), rotated).Rekey(ctx); err != nil || len(rep.Unopened) != 1 {
		t.Fatalf("Rekey with a ring lacking the key: %+v, %v", rep, err)
	}
}

func mustKey(t *testing.T) []byte {
	t.Helper()
	k, _ := vault.NewKey()
	keys, err := vault.ParseKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	return keys[0]
}

// TestStoreDown: with the server gone, every operation fails with an error that wraps
// state.ErrUnavailable (or the connection's) and is never ErrNotFound, and the failure is counted
// under the credentials feature.
func TestStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "t:")
	s := New(c)
	ev.WaitStatus(t, true)
	srv.Kill()
	ev.WaitStatus(t, false)
	ctx := context.Background()
	alice := vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}
	if _, _, err := s.Get(ctx, alice); err == nil || errors.Is(err, vault.ErrNotFound) || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Get with the store down: %v, want state.ErrUnavailable", err)
	}
	if err := s.Delete(ctx, alice); err == nil || errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("Delete with the store down: %v", err)
	}
	if _, err := s.List(ctx, vault.Filter{}); err == nil {
		t.Fatal("List with the store down succeeded")
	}
	if ev.ErrorsOf(state.FeatureCredentials) == 0 {
		t.Error("no failure counted under the credentials feature")
	}
}

// BenchmarkGet is what a call to a per_user upstream adds with the vault in Redis (state.redis): one
// HGET on loopback and one AES-256-GCM open.
func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	c, ev := redistest.Open(b, srv, "b:")
	ev.WaitStatus(b, true)
	k, _ := vault.NewKey()
	keys, _ := vault.LoadKeyring(vault.KeySource{Env: "K", LookupEnv: func(string) (string, bool) { return k, true }})
	v := vault.NewEncrypted(New(c), keys)
	alice := vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}
	if err := v.Put(context.Background(), vault.Entry{Key: alice}, []byte("an-api-key-of-forty-characters-0000000000")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := v.Get(context.Background(), alice); err != nil {
			b.Fatal(err)
		}
	}
}
