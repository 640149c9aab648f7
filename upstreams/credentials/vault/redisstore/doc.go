// Package redisstore keeps the vault's sealed records in Redis (the store of package state), so that
// every replica sharing state.redis acts upstream as each user with the same credentials: a secret
// set, an authorization given or a credential revoked through one replica holds on all of them at
// the next call. Records arrive here sealed (vault.Encrypted seals them before, opens them after): Redis
// never holds a secret in clear. It is a package of its own so that a gateway without Redis does not
// depend on it.
package redisstore
