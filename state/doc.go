// Package state is the store several toolgate replicas share: one Redis
// server, its health, and the narrow pieces the features keep there.
//
// Today two features use it: rate limits (RateLimiter, a
// ratelimit.Limiter whose buckets live in Redis, so a limit holds across
// replicas) and policy reloads (PolicySync, which tells every replica to
// re-read its policy files when one of them reloaded). Duplicate
// suppression, approvals and breaker state are next; until then each
// replica keeps its own.
//
// One rule runs through it: the store failing must never stall a call. A
// background PING keeps Client.Err current; while it reports the store
// down, operations fail at once instead of each waiting for a timeout, and
// each feature applies its configured failure behaviour. When Redis comes
// back the PING notices, and everything resumes without a restart.
package state
