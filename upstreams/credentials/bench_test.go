package credentials

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/upstreams/credentials/credentialstest"
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
