// Package vaulttest checks that a vault.Backend keeps the contract the encrypted store relies on:
// the same tests run against the file, Redis and memory backends. It is imported only by tests.
package vaulttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// Backend runs the contract's tests on b, which must start empty.
func Backend(t *testing.T, b vault.Backend) {
	t.Helper()
	ctx := context.Background()
	takeOnce(t, b)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	keys := []vault.Key{{Principal: "bob", Upstream: "orders", Kind: vault.Secret}, {Principal: "alice", Upstream: "orders", Kind: vault.OAuth},
		{Principal: "alice", Upstream: "crm", Kind: vault.Secret}, {Upstream: "crm", Kind: vault.Registration}}
	for i, k := range keys {
		e := vault.Entry{Key: k, Updated: at, Expires: at.Add(time.Hour), Source: "operator"}
		if err := b.Put(ctx, e, []byte{byte(i), 1, 2, 3}); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
	}
	data, e, err := b.Get(ctx, keys[0])
	if err != nil || string(data) != string([]byte{0, 1, 2, 3}) || e.Key != keys[0] || !e.Updated.Equal(at) ||
		!e.Expires.Equal(at.Add(time.Hour)) || e.Source != "operator" {
		t.Fatalf("Get = %v, %+v, %v; want what was put", data, e, err)
	}
	data[0] = 9
	if again, _, _ := b.Get(ctx, keys[0]); again[0] != 0 {
		t.Fatal("Get returned the backend's own bytes, not a copy")
	}
	if _, _, err := b.Get(ctx, vault.Key{Principal: "carol", Upstream: "orders", Kind: vault.Secret}); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("Get of a key never stored: %v, want ErrNotFound", err)
	}

	all, err := b.List(ctx, vault.Filter{})
	if err != nil || len(all) != 4 {
		t.Fatalf("List = %+v, %v; want 4 entries", all, err)
	}
	want := []vault.Key{keys[3], keys[2], keys[1], keys[0]} // by upstream, principal, kind
	for i, e := range all {
		if e.Key != want[i] {
			t.Fatalf("List[%d] = %s, want %s (sorted by upstream, principal, kind)", i, e.Key, want[i])
		}
	}
	if l, _ := b.List(ctx, vault.Filter{Principal: "alice", Kind: vault.Secret}); len(l) != 1 || l[0].Key != keys[2] {
		t.Fatalf("List(alice, secret) = %+v", l)
	}

	// Replacing, and compare-and-put.
	if err := b.Put(ctx, vault.Entry{Key: keys[0], Updated: at.Add(time.Minute), Source: "user"}, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if data, e, _ := b.Get(ctx, keys[0]); string(data) != "new" || e.Source != "user" || !e.Expires.IsZero() {
		t.Fatalf("after a second Put: %q, %+v", data, e)
	}
	if err := b.CompareAndPut(ctx, vault.Entry{Key: keys[0]}, []byte("old"), []byte("x")); !errors.Is(err, vault.ErrChanged) {
		t.Fatalf("CompareAndPut with stale data: %v, want ErrChanged", err)
	}
	if err := b.CompareAndPut(ctx, vault.Entry{Key: keys[0], Source: "rekey"}, []byte("new"), []byte("x")); err != nil {
		t.Fatalf("CompareAndPut with current data: %v", err)
	}
	if data, e, _ := b.Get(ctx, keys[0]); string(data) != "x" || e.Source != "rekey" {
		t.Fatalf("after CompareAndPut: %q, %+v", data, e)
	}
	missing := vault.Key{Principal: "zed", Upstream: "orders", Kind: vault.Secret}
	if err := b.CompareAndPut(ctx, vault.Entry{Key: missing}, []byte("x"), []byte("y")); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("CompareAndPut of a missing key: %v, want ErrNotFound", err)
	}

	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatalf("Delete %s: %v", k, err)
		}
	}
	if err := b.Delete(ctx, keys[0]); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	if l, err := b.List(ctx, vault.Filter{}); err != nil || len(l) != 0 {
		t.Fatalf("List after deleting all: %+v, %v", l, err)
	}
}

// takeOnce: a token is taken once until it expires; another token is not affected.
func takeOnce(t *testing.T, b vault.Backend) {
	t.Helper()
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	if ok, err := b.TakeOnce(ctx, "link-a", until); !ok || err != nil {
		t.Fatalf("the first TakeOnce: %v, %v; want true", ok, err)
	}
	if ok, err := b.TakeOnce(ctx, "link-a", until); ok || err != nil {
		t.Fatalf("a second TakeOnce of the same id: %v, %v; want false", ok, err)
	}
	if ok, err := b.TakeOnce(ctx, "link-b", until); !ok || err != nil {
		t.Fatalf("TakeOnce of another id: %v, %v; want true", ok, err)
	}
	if es, err := b.List(ctx, vault.Filter{}); err != nil || len(es) != 0 {
		t.Fatalf("used tokens appear among the credentials: %v, %v", es, err)
	}
}
