// Package redisstore keeps rate-limit buckets in Redis (the store of package
// state), so that a limit holds across every replica rather than per
// process: Limiter is a ratelimit.Limiter, with the same all-or-none token
// buckets and the same waits as ratelimit.Memory. It lives beside package
// ratelimit, which owns the logic and the in-memory limiter, so that
// everything about rate limits is in one folder; it is a package of its
// own so that a gateway without Redis does not depend on it.
package redisstore
