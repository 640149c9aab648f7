package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"slices"
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
	sum := sha256.Sum256([]byte(presented))
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	k, ok := m[string(hexSum[:])] // the conversion in a lookup allocates nothing (HashKey's string did, every request)
	return k, ok
}

// KeyChange is what [Authenticator.ReplaceAPIKeys] changed, for the log and the audit trail: counts and
// principals only, never a key nor a key's hash. A key is identified by its hash, so a key that now
// authenticates as another principal counts as removed (the old principal) and added (the new one),
// and a principal whose key was rotated appears in both Added and Removed.
type KeyChange struct {
	Before, After int      // keys accepted before and after the swap
	Added         []string // the principal of each key accepted now and not before, sorted
	Removed       []string // the principal of each key accepted before and not now, sorted
	Changed       []string // the principal of each kept key whose attributes changed, sorted
}

// Unchanged reports whether the swap changed nothing a request could notice.
func (c KeyChange) Unchanged() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Changed) == 0
}

// ReplaceAPIKeys makes keys the accepted API keys, in place of the ones [Options].APIKeys or an earlier
// call gave, and returns what changed. The swap is one atomic store: a request being authenticated
// uses either the old set or the new one, never a mix, and every request that starts after
// ReplaceAPIKeys returns uses the new set, so a removed key is refused from the next request on. keys
// are copied, as New copies Options.APIKeys; the rest of the Authenticator (JWT, anonymous, resource)
// is not changed. Safe to call concurrently with Authenticate and with itself.
func (a *Authenticator) ReplaceAPIKeys(keys []APIKey) KeyChange {
	next := newAPIKeys(keys)
	prev := *a.keys.Swap(&next)
	return diffAPIKeys(prev, next)
}

// diffAPIKeys compares two key sets by hash.
func diffAPIKeys(prev, next apiKeys) KeyChange {
	c := KeyChange{Before: len(prev), After: len(next)}
	for h, k := range next {
		old, ok := prev[h]
		switch {
		case !ok:
			c.Added = append(c.Added, k.principal)
		case old.principal != k.principal:
			c.Removed = append(c.Removed, old.principal)
			c.Added = append(c.Added, k.principal)
		case !maps.Equal(old.attrs, k.attrs):
			c.Changed = append(c.Changed, k.principal)
		}
	}
	for h, k := range prev {
		if _, ok := next[h]; !ok {
			c.Removed = append(c.Removed, k.principal)
		}
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	return c
}
