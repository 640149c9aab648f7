package dedup

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// Key says which calls are "the same": the same principal, the same canonical tool ID, and either the same canonical
// arguments or the same client idempotency key (which takes precedence). Keys never collide across principals or tools
// (hash an unambiguous encoding, e.g. length-prefixed fields, with SHA-256).
//
// A Key is comparable and can be a map key. Its zero value matches no call
// made through ArgsKey or IdempotencyKey. Which of the two to use is the
// caller's decision: an idempotency key, when the client sent a valid one,
// replaces the arguments (a repeat with the same key and other arguments is
// the same call).
type Key struct {
	sum [sha256.Size]byte
}

// String is the key's SHA-256 in hex, for logs. It reveals nothing of the
// arguments.
func (k Key) String() string { return hex.EncodeToString(k.sum[:]) }

// Kinds of key, hashed first so that an arguments key and an idempotency key
// never collide, whatever their fields.
const (
	kindArgs        = 'A'
	kindIdempotency = 'I'
	kindArgsForCaps = 'C' // ArgsKeyFor a client that declared capabilities
)

// keyDomain separates these hashes from any other SHA-256 use.
const keyDomain = "toolgate/dedup/key/v1\x00"

// ArgsKey names the call of tool (its canonical ID, "<server>/<tool>") by
// principal with canonicalArgs (the output of canonjson.Canonical).
func ArgsKey(principal, tool string, canonicalArgs []byte) Key {
	return newKey(kindArgs, principal, tool, "", canonicalArgs)
}

// ArgsKeyFor is ArgsKey for a client whose declared capabilities digest
// to declared (upstreams.CapabilityDigest): a 2026-07-28 upstream is told
// them and may plan its answer by them, so calls of clients that declared
// differently are not the same call. With declared empty (the client
// declared none) it is ArgsKey.
func ArgsKeyFor(principal, tool, declared string, canonicalArgs []byte) Key {
	if declared == "" {
		return ArgsKey(principal, tool, canonicalArgs)
	}
	return newKey(kindArgsForCaps, principal, tool, declared, canonicalArgs)
}

// IdempotencyKey names the call of tool (its canonical ID) by principal that
// carries the client's idempotency key (see IdempotencyKeyFrom).
func IdempotencyKey(principal, tool, key string) Key {
	return newKey(kindIdempotency, principal, tool, "", []byte(key))
}

// newKey hashes domain, kind, then each field as an 8-byte big-endian length
// followed by its bytes: no two different field lists encode alike.
func newKey(kind byte, principal, tool, declared string, last []byte) Key {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(keyDomain))
	h.Write([]byte{kind})
	for i, f := range [...]string{principal, tool, declared} {
		if i == 2 && kind != kindArgsForCaps {
			break
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(last)))
	h.Write(n[:])
	h.Write(last)
	var k Key
	h.Sum(k.sum[:0])
	return k
}

// MetaKey is the name, in a tools/call request's _meta, of the client's
// idempotency key. Its value must be a non-empty JSON string of at most
// MaxIdempotencyKeyBytes bytes (UTF-8); anything else is ignored and the call
// is deduplicated by its arguments instead. Example:
//
//	{"method": "tools/call", "params": {"name": "orders__refund_order",
//	  "arguments": {"order_id": 4821, "amount": 20},
//	  "_meta": {"io.toolgate/idempotency-key": "refund-4821-7f3a"}}}
//
// A key is scoped to the principal and the tool: two principals, or two
// tools, never share results through the same key.
const MetaKey = "io.toolgate/idempotency-key"

// MaxIdempotencyKeyBytes bounds the length of a client's idempotency key.
const MaxIdempotencyKeyBytes = 256

// ErrIdempotencyKeyIgnored is wrapped by the error IdempotencyKeyFrom
// returns for a key it ignores.
var ErrIdempotencyKeyIgnored = errors.New(MetaKey + " ignored")

// IdempotencyKeyFrom reads the client's key from a tools/call request's _meta: the name is "io.toolgate/idempotency-key"
// (document it; a non-empty string up to 256 bytes, else ignored with a reason).
//
// It returns ("", nil) when meta has no such field, (key, nil) for a valid
// key, and ("", err) with err wrapping ErrIdempotencyKeyIgnored and saying
// why when the field is present but unusable (for the log; the call then
// goes on, deduplicated by its arguments).
func IdempotencyKeyFrom(meta *mcp.Meta) (string, error) {
	if meta == nil {
		return "", nil
	}
	v, ok := meta.AdditionalFields[MetaKey]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: it must be a string, got %s", ErrIdempotencyKeyIgnored, jsonKind(v))
	case s == "":
		return "", fmt.Errorf("%w: it is empty", ErrIdempotencyKeyIgnored)
	case len(s) > MaxIdempotencyKeyBytes:
		return "", fmt.Errorf("%w: it is %d bytes long, over the %d byte limit", ErrIdempotencyKeyIgnored, len(s), MaxIdempotencyKeyBytes)
	}
	return s, nil
}

// jsonKind names the JSON type of a value decoded by encoding/json.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// ParseKey reads a key back from its String form (a recorded answer names
// the arguments it was for by it).
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k.sum) {
		return Key{}, fmt.Errorf("dedup: not a key: %q", s)
	}
	copy(k.sum[:], b)
	return k, nil
}
