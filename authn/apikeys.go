package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"strings"
)

// API keys are minted here (`toolgate keys new`), stored in configuration only as their SHA-256
// hex, and resolved by [Authenticator.Authenticate], which hashes the presented key once and looks
// the hash up.

// KeyPrefix starts every API key minted by [NewKey], so a leaked key is recognisable
// (secret scanners, logs) as a toolgate key.
const KeyPrefix = "tg_"

// keyBytes is the amount of randomness in a minted key.
const keyBytes = 32

// NewKey mints a random API key (32 bytes from crypto/rand, encoded "tg_" + base64url without
// padding) and returns it with its SHA-256 hex. The key is shown once to the operator; only the
// hash goes into configuration. The alphabet has no ".", so a minted key never looks like a JWT.
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

// apiKey is what one configured key authenticates as.
type apiKey struct {
	principal string
	attrs     map[string]string // nil when the key has none
}

// apiKeys maps stored key hashes (lowercase hex) to what they authenticate as. It is never
// modified after newAPIKeys, so it is safe for concurrent use.
type apiKeys map[string]apiKey

// newAPIKeys copies the configured keys. Upper-case hex is folded to lower case (config.Load does
// it too; Options built in code may not have been through it). An entry without a principal can
// never match. The attributes are copied: the caller may change its Options afterwards.
func newAPIKeys(keys []APIKey) apiKeys {
	m := make(apiKeys, len(keys))
	for _, k := range keys {
		if k.Principal == "" {
			continue
		}
		e := apiKey{principal: k.Principal}
		if len(k.Attributes) > 0 {
			e.attrs = maps.Clone(k.Attributes)
		}
		m[strings.ToLower(k.SHA256)] = e
	}
	return m
}

// lookup resolves a presented bearer key: it hashes the key once and looks the hash up (so no
// timing leak on the key itself). An empty key never matches.
func (m apiKeys) lookup(presented string) (apiKey, bool) {
	if presented == "" {
		return apiKey{}, false
	}
	k, ok := m[HashKey(presented)]
	return k, ok
}
