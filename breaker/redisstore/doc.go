// Package redisstore shares circuit breaker openings between replicas
// through Redis (the store of package state): when one replica's breaker of
// an upstream opens, every other replica forces its own open for the rest
// of the opening (Sync, which feeds breaker.Set's OnOpen and ForceOpen).
// News travels, never a shared breaker, and nothing here is on a call's
// path. It lives beside package breaker, which owns the breakers and says
// why they are per replica, so that everything about breakers is in one
// folder; it is a package of its own so that a gateway without Redis does
// not depend on it.
package redisstore
