package credentials

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/upstreams/credentials/credentialstest"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// BenchmarkCachedExchange is what a call to a token_exchange upstream adds once its caller's token is
// cached: hashing the inbound JWT and one lookup (a static header adds nothing).
func BenchmarkCachedExchange(b *testing.B) {
	as := credentialstest.Start(b)
	src, err := New(Options{Server: "orders", Mode: TokenExchange, TokenURL: as.TokenURL(), Egress: loopbackOK, ClientID: credentialstest.GatewayID,
		ClientSecret: credentialstest.GatewaySecret, Audience: "orders-api", Caller: callerFrom})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	ctx := asCaller(context.Background(), Caller{Principal: "alice", Token: as.UserToken("alice")})
	if _, err := src.Authorization(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdExchange is a call whose caller has no cached token: one token exchange at the
// in-process authorization server (loopback HTTP, a JWT signed per exchange).
func BenchmarkColdExchange(b *testing.B) {
	as := credentialstest.Start(b)
	src, err := New(Options{Server: "orders", Mode: TokenExchange, TokenURL: as.TokenURL(), Egress: loopbackOK, ClientID: credentialstest.GatewayID,
		ClientSecret: credentialstest.GatewaySecret, Audience: "orders-api", Caller: callerFrom, MaxCached: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	tokens := []string{as.UserToken("alice"), as.UserToken("bob")}
	i := 0
	for b.Loop() {
		i++
		// Alternating callers with a cache of one: every call exchanges.
		ctx := asCaller(context.Background(), Caller{Principal: "p", Token: tokens[i%2]})
		if _, err := src.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPerUserFromFile is what a call to a per_user upstream adds with the vault in its file (the
// default): one stat of the file (it is parsed again only when it changed), a map lookup and one
// AES-256-GCM open.
func BenchmarkPerUserFromFile(b *testing.B) {
	keys, err := vault.LoadKeyring(vault.KeySource{Env: "K", LookupEnv: func(string) (string, bool) {
		k, _ := vault.NewKey()
		return k, true
	}})
	if err != nil {
		b.Fatal(err)
	}
	f, err := vault.OpenFile(filepath.Join(b.TempDir(), "toolgate.credentials.json"))
	if err != nil {
		b.Fatal(err)
	}
	v := vault.NewEncrypted(f, keys)
	for i := range 1000 { // a vault of a thousand users
		e := vault.Entry{Key: vault.Key{Principal: fmt.Sprintf("user%d", i), Upstream: "orders", Kind: vault.Secret}}
		if err := v.Put(context.Background(), e, []byte("an-api-key-of-forty-characters-0000000000")); err != nil {
			b.Fatal(err)
		}
	}
	src, err := NewPerUser(PerUserOptions{Server: "orders", Vault: v, Caller: callerFrom})
	if err != nil {
		b.Fatal(err)
	}
	ctx := asCaller(context.Background(), Caller{Principal: "user500"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
