// Package redisstore keeps approval requests in Redis (the store of
// package state): Store is an approvals.Store whose decisions are Lua
// scripts, so that an approval granted through one replica is consumed
// through any replica exactly once. It lives beside package approvals,
// which owns the requests, their rules, the file store and the admin API,
// so that everything about approvals is in one folder; it is a package of
// its own so that a gateway without Redis does not depend on it.
package redisstore
