// Package dedup suppresses duplicate tool calls: it decides which calls are
// "the same" and lets such a call run upstream at most once, sharing its
// result with identical calls in flight and replaying it for a window after.
//
// It has two parts, used by the guard stage of the call pipeline, on top of
// the canonical argument bytes from canonjson.Canonical (so that key order,
// whitespace, string escapes and number spelling do not make two calls
// different, while numbers keep their exact value):
//
//   - Key names a call: ArgsKey (principal, canonical tool ID, canonical
//     arguments) or IdempotencyKey (principal, canonical tool ID, the
//     client's key from _meta["io.toolgate/idempotency-key"], see
//     IdempotencyKeyFrom). Keys are SHA-256 over a length-prefixed encoding
//     and never collide across principals, tools or kinds.
//   - Table runs a call for a key at most once at a time: a second caller
//     joins the one in flight (Joined), and a caller within the window after
//     it finished gets the recorded result (Replayed) without running it.
//
// Which tools are deduplicated (not retry-safe ones, unless configured), the
// windows, what is worth recording and how a replay is marked in the
// envelope are the caller's decisions; this package has no configuration
// and knows nothing about MCP beyond the _meta field it reads.
package dedup
