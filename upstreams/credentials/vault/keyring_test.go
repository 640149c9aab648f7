package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func ring(t *testing.T, keys ...[]byte) *Keyring {
	t.Helper()
	r, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var aliceOrders = Key{Principal: "alice", Upstream: "orders", Kind: Secret}

func TestSealOpens(t *testing.T) {
	r := ring(t, newKey(t))
	sealed, err := r.Seal(aliceOrders, []byte("alice-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("alice-api-key")) {
		t.Fatal("the sealed record holds the secret in clear")
	}
	again, _ := r.Seal(aliceOrders, []byte("alice-api-key"))
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of one secret are equal: the nonce is not random")
	}
	if got, err := r.Open(aliceOrders, sealed); err != nil || string(got) != "alice-api-key" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if len(sealed) != headerSize+len("alice-api-key")+16 {
		t.Fatalf("sealed is %d bytes, want header, data and tag", len(sealed))
	}
}

// TestTamperedRecordFailsToOpen: any changed byte (header, nonce, ciphertext, tag) fails with ErrOpen
// or ErrNoKey (a changed key id), never with other data.
func TestTamperedRecordFailsToOpen(t *testing.T) {
	r := ring(t, newKey(t))
	sealed, _ := r.Seal(aliceOrders, []byte("alice-api-key"))
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := r.Open(aliceOrders, bad); !errors.Is(err, ErrOpen) && !errors.Is(err, ErrNoKey) {
			t.Fatalf("byte %d changed: Open = %v, want ErrOpen or ErrNoKey", i, err)
		}
	}
	if _, err := r.Open(aliceOrders, sealed[:len(sealed)-1]); !errors.Is(err, ErrOpen) {
		t.Fatalf("truncated: %v, want ErrOpen", err)
	}
	if _, err := r.Open(aliceOrders, nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("empty: %v, want ErrOpen", err)
	}
}

// TestMovedCiphertextFailsToOpen: a record copied under another principal, upstream or kind does not
// open, so whoever can write the store cannot hand alice's secret to mallory.
func TestMovedCiphertextFailsToOpen(t *testing.T) {
	r := ring(t, newKey(t))
	sealed, _ := r.Seal(aliceOrders, []byte("alice-api-key"))
	for _, k := range []Key{
		{Principal: "mallory", Upstream: "orders", Kind: Secret},
		{Principal: "alice", Upstream: "crm", Kind: Secret},
		{Principal: "alice", Upstream: "orders", Kind: OAuth},
		{Principal: "alice\x00", Upstream: "orders", Kind: Secret},
		{Principal: "aliceo", Upstream: "rders", Kind: Secret}, // the same bytes, split elsewhere
	} {
		if _, err := r.Open(k, sealed); !errors.Is(err, ErrOpen) {
			t.Errorf("opened under %s: %v, want ErrOpen", k, err)
		}
	}
}

func TestWrongKeyFailsToOpen(t *testing.T) {
	sealed, _ := ring(t, newKey(t)).Seal(aliceOrders, []byte("alice-api-key"))
	if _, err := ring(t, newKey(t)).Open(aliceOrders, sealed); !errors.Is(err, ErrNoKey) {
		t.Fatalf("another key: %v, want ErrNoKey", err)
	}
}

// TestRotation: a ring with the new key first seals with it and still opens what the old one sealed;
// Rekey re-seals every record so that the old key can go.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := newKey(t), newKey(t)
	backend := &Memory{}
	before := NewEncrypted(backend, ring(t, oldKey))
	for _, p := range []string{"alice", "bob"} {
		if err := before.Put(ctx, Entry{Key: Key{Principal: p, Upstream: "orders", Kind: Secret}}, []byte(p+"-key")); err != nil {
			t.Fatal(err)
		}
	}
	rotated := ring(t, newKey, oldKey)
	during := NewEncrypted(backend, rotated)
	if got, _, err := during.Get(ctx, aliceOrders); err != nil || string(got) != "alice-key" {
		t.Fatalf("the rotated ring reads an old record: %q, %v", got, err)
	}
	rep, err := during.Rekey(ctx)
	if err != nil || rep.Resealed != 2 || rep.Current != 0 || len(rep.Unopened) != 0 {
		t.Fatalf("Rekey = %+v, %v; want 2 resealed", rep, err)
	}
	if rep, _ := during.Rekey(ctx); rep.Resealed != 0 || rep.Current != 2 {
		t.Fatalf("a second Rekey = %+v, want both current", rep)
	}
	after := NewEncrypted(backend, ring(t, newKey)) // the old key dropped
	for _, p := range []string{"alice", "bob"} {
		if got, _, err := after.Get(ctx, Key{Principal: p, Upstream: "orders", Kind: Secret}); err != nil || string(got) != p+"-key" {
			t.Fatalf("%s after the old key was dropped: %q, %v", p, got, err)
		}
	}
	if _, _, err := NewEncrypted(backend, ring(t, oldKey)).Get(ctx, aliceOrders); !errors.Is(err, ErrNoKey) {
		t.Fatalf("the old key alone after rekey: %v, want ErrNoKey", err)
	}
}

// TestRekeyLeavesWhatItCannotOpen: a record of a key no longer held is reported, not lost.
func TestRekeyLeavesWhatItCannotOpen(t *testing.T) {
	ctx := context.Background()
	backend := &Memory{}
	lost := newKey(t)
	_ = NewEncrypted(backend, ring(t, lost)).Put(ctx, Entry{Key: aliceOrders}, []byte("x"))
	rep, err := NewEncrypted(backend, ring(t, newKey(t))).Rekey(ctx)
	if err != nil || len(rep.Unopened) != 1 || rep.Unopened[0] != aliceOrders {
		t.Fatalf("Rekey = %+v, %v; want alice's record reported unopened", rep, err)
	}
	if _, _, err := NewEncrypted(backend, ring(t, lost)).Get(ctx, aliceOrders); err != nil {
		t.Fatalf("the unopened record was changed: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	text := "# rotated 2026-12-01\n" + base64.StdEncoding.EncodeToString(k1) + "\n" + base64.RawURLEncoding.EncodeToString(k2) + "\n"
	keys, err := ParseKeys(text)
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], k1) || !bytes.Equal(keys[1], k2) {
		t.Fatalf("ParseKeys = %d keys, %v", len(keys), err)
	}
	if keys, err := ParseKeys(base64.StdEncoding.EncodeToString(k1) + ", " + base64.StdEncoding.EncodeToString(k2)); err != nil || len(keys) != 2 {
		t.Fatalf("comma-separated: %d keys, %v", len(keys), err)
	}
	short := base64.StdEncoding.EncodeToString(k1[:16])
	for _, c := range []struct{ text, want string }{
		{"", "no key"},
		{"# only a comment\n", "no key"},
		{short, "key 1 of 1: expected 32 bytes in base64 (44 characters; `toolgate credentials newkey` prints one), got 16 bytes"},
		{base64.StdEncoding.EncodeToString(k1) + " not-base64!", "key 2 of 2: expected base64"},
	} {
		_, err := ParseKeys(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseKeys(%q) = %v, want %q", c.text, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), short) {
			t.Errorf("the message quotes the key: %v", err)
		}
	}
	if _, err := NewKeyring(k1, k1); err == nil || !strings.Contains(err.Error(), "key 2 of 2 appears twice") {
		t.Errorf("a key twice: %v", err)
	}
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	key, _ := NewKey()
	file := filepath.Join(dir, "credentials.key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := LoadKeyring(KeySource{File: file}); err != nil || r.Len() != 1 {
		t.Fatalf("LoadKeyring(file) = %v", err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(KeySource{File: file}); err == nil ||
		!strings.Contains(err.Error(), "key file "+file+": mode 0640 lets other users read the key; expected 0600 or stricter") {
		t.Fatalf("a group-readable key file: %v", err)
	}
	if _, err := LoadKeyring(KeySource{File: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing key file: %v", err)
	}
	env := func(v string, ok bool) func(string) (string, bool) {
		return func(string) (string, bool) { return v, ok }
	}
	if r, err := LoadKeyring(KeySource{Env: "TG_KEY", LookupEnv: env(key, true)}); err != nil || r.Len() != 1 {
		t.Fatalf("LoadKeyring(env) = %v", err)
	}
	if _, err := LoadKeyring(KeySource{Env: "TG_KEY", LookupEnv: env("", false)}); err == nil ||
		err.Error() != "environment variable TG_KEY is not set: expected a base64 32-byte key (`toolgate credentials newkey` prints one)" {
		t.Fatalf("an unset variable: %v", err)
	}
	if _, err := LoadKeyring(KeySource{Env: "TG_KEY", LookupEnv: env("c2hvcnQ=", true)}); err == nil ||
		!strings.HasPrefix(err.Error(), "environment variable TG_KEY: key 1 of 1: expected 32 bytes") {
		t.Fatalf("a short key: %v", err)
	}
}

func TestCheckSecret(t *testing.T) {
	if err := CheckSecret([]byte("sk-live_abc.DEF~123")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		secret string
		want   string
	}{
		{"", "the secret is empty"},
		{"abc\r\nX-Evil: 1", "the secret holds a control character at byte 4 (a newline?); it goes into a request header"},
		{"abc\x00", "control character at byte 4"},
		{" abc", "starts or ends with a space"},
		{strings.Repeat("a", MaxSecretBytes+1), "the secret is 8193 bytes, at most 8192 are accepted"},
	} {
		if err := CheckSecret([]byte(c.secret)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckSecret(%.20q) = %v, want %q", c.secret, err, c.want)
		}
	}
}

// TestCheckFindsWhatDoesNotOpen: Check opens every record and names those no key of the ring opens.
func TestCheckFindsWhatDoesNotOpen(t *testing.T) {
	ctx := context.Background()
	backend := &Memory{}
	k1, k2 := newKey(t), newKey(t)
	_ = NewEncrypted(backend, ring(t, k1)).Put(ctx, Entry{Key: aliceOrders}, []byte("a"))
	bob := Key{Principal: "bob", Upstream: "orders", Kind: Secret}
	_ = NewEncrypted(backend, ring(t, k2)).Put(ctx, Entry{Key: bob}, []byte("b"))
	opened, unopened, err := NewEncrypted(backend, ring(t, k1)).Check(ctx)
	if err != nil || opened != 1 || len(unopened) != 1 || unopened[0] != bob {
		t.Fatalf("Check = %d, %v, %v; want alice opened and bob not", opened, unopened, err)
	}
	if opened, unopened, _ := NewEncrypted(backend, ring(t, k1, k2)).Check(ctx); opened != 2 || len(unopened) != 0 {
		t.Fatalf("with both keys: %d opened, %v not", opened, unopened)
	}
}
