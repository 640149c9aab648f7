// Package redisstore is duplicate suppression shared by every replica: a
// dedup.Shared kept in Redis (the store of package state), of leased
// in-flight markers and recorded answers, so that a duplicate sent to
// another replica is joined or replayed rather than run again. It lives
// beside package dedup, which owns the keys, the in-process table and the
// interface this implements, so that everything about duplicate
// suppression is in one folder; it is a package of its own so that a
// gateway without Redis does not depend on it. Its key layout, and how it
// survives the store losing its data, are described in store.go.
package redisstore
