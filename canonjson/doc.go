// Package canonjson has one job: the canonical form of JSON that hashes and
// call identities are built on. Canonical rewrites one JSON value with
// object keys sorted, no insignificant whitespace, strings by their decoded
// value and numbers by their exact value (math/big, never float64), and
// refuses input that parsers could read in more than one way: duplicate
// keys, invalid UTF-8, lone surrogate escapes. Tool pins (pins) hash it;
// call deduplication and approvals (dedup, proxy) key calls by it.
package canonjson
