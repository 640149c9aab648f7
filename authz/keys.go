package authz

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// KeyPrefix starts every API key minted by [NewKey], so a leaked key is recognisable
// (secret scanners, logs) as a toolgate key.
const KeyPrefix = "tg_"

// keyBytes is the amount of randomness in a minted key.
const keyBytes = 32

// NewKey mints a random API key (32 bytes from crypto/rand, encoded "tg_" + base64url without
// padding) and returns it with its SHA-256 hex. The key is shown once to the operator; only the
// hash goes into configuration.
func NewKey() (key, sha256hex string, err error) {
	var b [keyBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, HashKey(key), nil
}

// HashKey returns the lowercase SHA-256 hex of key, the form in which keys are stored.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ValidKeyHash reports whether s has the shape of a stored key hash: 64 hex digits.
// Configuration loading can use it to reject a pasted key or a truncated hash.
func ValidKeyHash(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// Keys maps stored key hashes to principals. It is immutable after [NewKeys] and safe for
// concurrent use.
type Keys struct {
	byHash map[string]string
}

// NewKeys copies hashToPrincipal (keys are SHA-256 hex hashes; upper-case hex is folded to lower
// case). Entries with an empty principal can never match.
func NewKeys(hashToPrincipal map[string]string) *Keys {
	m := make(map[string]string, len(hashToPrincipal))
	for h, p := range hashToPrincipal {
		if p == "" {
			continue
		}
		m[strings.ToLower(h)] = p
	}
	return &Keys{byHash: m}
}

// Len is the number of usable keys.
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.byHash)
}

// Principal resolves a presented bearer key. It hashes the key and looks the hash up (so no
// timing leak on the key itself). An empty key never matches.
func (k *Keys) Principal(presented string) (string, bool) {
	if k == nil || presented == "" {
		return "", false
	}
	return k.PrincipalOfHash(HashKey(presented))
}

// PrincipalOfHash is Principal for a key already hashed with HashKey.
func (k *Keys) PrincipalOfHash(hash string) (string, bool) {
	if k == nil {
		return "", false
	}
	p, ok := k.byHash[hash]
	return p, ok
}
