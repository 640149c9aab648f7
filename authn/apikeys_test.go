package authn

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestNewKey(t *testing.T) {
	k1, h1, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, h2, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, hash string }{{k1, h1}, {k2, h2}} {
		if !strings.HasPrefix(c.key, "tg_") {
			t.Errorf("key %q lacks the tg_ prefix", c.key)
		}
		// 32 bytes, base64url without padding: 43 characters.
		if got, want := len(c.key), len("tg_")+43; got != want {
			t.Errorf("len(key) = %d, want %d", got, want)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(c.key, "tg_"))
		if err != nil || len(raw) != 32 {
			t.Errorf("key body is not 32 bytes of base64url without padding: %v (len %d)", err, len(raw))
		}
		if strings.ContainsAny(c.key, "=+/") {
			t.Errorf("key %q is not URL-safe unpadded base64", c.key)
		}
		if HashKey(c.key) != c.hash {
			t.Errorf("HashKey(key) = %s, NewKey returned %s", HashKey(c.key), c.hash)
		}
		if len(c.hash) != 64 || strings.Trim(c.hash, "0123456789abcdef") != "" {
			t.Errorf("returned hash %q is not 64 lowercase hex digits", c.hash)
		}
	}
	if k1 == k2 || h1 == h2 {
		t.Fatal("two calls to NewKey returned the same key")
	}
}

func TestHashKey(t *testing.T) {
	// A well-known vector: SHA-256 of "test".
	if got, want := HashKey("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"; got != want {
		t.Fatalf("HashKey(test) = %s, want %s", got, want)
	}
	sum := sha256.Sum256([]byte("tg_x"))
	if got := HashKey("tg_x"); got != hex.EncodeToString(sum[:]) || got != strings.ToLower(got) {
		t.Fatalf("HashKey not lowercase SHA-256 hex: %s", got)
	}
}

// TestAPIKeysLookup: a configured key resolves to its principal and attributes, whatever the case of
// its stored hash; nothing else does.
func TestAPIKeysLookup(t *testing.T) {
	aliceKey, aliceHash, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	bobKey, bobHash, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	orphanKey, orphanHash, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	src := []APIKey{
		{Principal: "alice", SHA256: aliceHash, Attributes: map[string]string{"region": "eu"}},
		{Principal: "bob", SHA256: strings.ToUpper(bobHash)}, // upper-case hex in Options still works
		{SHA256: orphanHash}, // no principal: never matches
		{Principal: "empty-key-owner", SHA256: HashKey("")},
	}
	keys := newAPIKeys(src)
	src[0].Principal = "mallory" // the table must not alias the caller's Options
	src[0].Attributes["region"] = "us"

	tests := []struct {
		name      string
		presented string
		want      string
		wantOK    bool
	}{
		{"hit alice", aliceKey, "alice", true},
		{"hit bob via upper-case stored hash", bobKey, "bob", true},
		{"miss unknown key", "tg_not-a-real-key", "", false},
		{"miss the hash itself presented as key", aliceHash, "", false},
		{"miss key with trailing space", aliceKey + " ", "", false},
		{"miss empty principal entry", orphanKey, "", false},
		{"miss empty key even if its hash is configured", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := keys.lookup(tc.presented)
			if got.principal != tc.want || ok != tc.wantOK {
				t.Fatalf("lookup(%q) = %q, %v; want %q, %v", tc.presented, got.principal, ok, tc.want, tc.wantOK)
			}
		})
	}
	if k, _ := keys.lookup(aliceKey); k.attrs["region"] != "eu" {
		t.Errorf("alice's attributes = %v, want region eu", k.attrs)
	}
	if k, _ := keys.lookup(bobKey); k.attrs != nil {
		t.Errorf("bob's attributes = %v, want nil", k.attrs)
	}
	if len(keys) != 3 {
		t.Errorf("%d usable keys, want 3", len(keys))
	}
}
