// Package state is the store several toolgate replicas share: one Redis
// server, its health, and the narrow pieces the features keep there.
//
// The features that use it:
//
//   - rate limits: RateLimiter, a ratelimit.Limiter whose buckets live in
//     Redis, so a limit holds across replicas;
//   - policy reloads: PolicySync, which tells every replica to re-read its
//     policy files when one of them reloaded;
//   - breakers: BreakerSync, which shares a breaker's openings;
//   - duplicate suppression: Dedup, a dedup.Shared of leased in-flight
//     markers and recorded answers, so a duplicate sent to another replica
//     is joined or replayed rather than run again;
//   - approvals: Approvals, an approvals.Store whose decisions are Lua
//     scripts, so an approval granted through one replica is consumed
//     through any replica exactly once.
//
// One rule runs through it: the store failing must never stall a call. A
// background PING keeps Client.Err current; while it reports the store
// down, operations fail at once instead of each waiting for a timeout, and
// each feature applies its configured failure behaviour (duplicate
// suppression and approvals refuse the call by default; approvals always
// do). When Redis comes back the PING notices, and everything resumes
// without a restart.
package state
