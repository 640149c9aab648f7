// Package redisstore shares the owners and ends of client sessions between
// replicas through Redis (the store of package state): a sessionids.Shared,
// so that a session its owner ended with DELETE on one replica is refused
// (404) by every replica. It lives beside package sessionids, which owns
// the ids, the sets kept in memory and the interface this implements, so
// that everything about session ids is in one folder; it is a package of
// its own so that a gateway without Redis does not depend on it. Its keys,
// and what happens while the store is down, are described in store.go.
package redisstore
