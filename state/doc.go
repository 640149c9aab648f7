// Package state is the store several toolgate replicas share: one Redis
// server, the connection to it, and its health. What each feature keeps
// there lives with the feature, in a redisstore package of its own:
//
//   - rate limits: ratelimit/redisstore, buckets that hold across replicas;
//   - policy reloads: authz/redisstore, which tells every replica to re-read
//     its policy files when one of them reloaded;
//   - breakers: breaker/redisstore, which shares a breaker's openings;
//   - duplicate suppression: dedup/redisstore, leased in-flight markers and
//     recorded answers, so a duplicate sent to another replica is joined or
//     replayed rather than run again;
//   - approvals: approvals/redisstore, whose decisions are Lua scripts, so
//     an approval granted through one replica is consumed through any
//     replica exactly once.
//
// This package holds only what they share: the Client (connection, key
// prefix, health check, error counting by feature), and the loops several
// of them run on it (a pub/sub subscription that survives outages, and
// background work retried until the store is back).
//
// One rule runs through it: the store failing must never stall a call. A
// background PING keeps Client.Err current; while it reports the store
// down, operations (Client.Do) fail at once instead of each waiting for a
// timeout, and each feature applies its configured failure behaviour
// (duplicate suppression and approvals refuse the call by default;
// approvals always do). When Redis comes back the PING notices, and
// everything resumes without a restart.
package state
