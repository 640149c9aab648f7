package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The cipher (docs/configuration.md, "Upstream credentials"): every record's data is sealed on its
// own with AES-256-GCM (crypto/cipher), a random 96-bit nonce, and as additional data the record's
// key (principal, upstream, kind) and the sealed record's header, so that a ciphertext copied under
// another key, or given another header, fails to open. A sealed record is
//
//	version (1 byte, 1) | key id (4 bytes) | nonce (12 bytes) | ciphertext and 16-byte tag
//
// The key id is the first 4 bytes of SHA-256("toolgate-vault-key-id" 0x00 key): it picks the key that
// opens the record among several (rotation) and says nothing usable about the key. Random nonces are
// safe for 2^32 seals under one key (NIST SP 800-38D's bound): a gateway storing a credential per
// user and refresh is many orders of magnitude below it, and rotation resets the count.
const (
	KeySize       = 32 // AES-256
	sealVersion   = 1
	keyIDSize     = 4
	nonceSize     = 12
	headerSize    = 1 + keyIDSize + nonceSize
	aadDomain     = "toolgate-vault/v1"
	keyIDDomain   = "toolgate-vault-key-id"
	maxKeysInRing = 16
)

// Keyring holds the keys that seal and open records: the first seals, every one opens, so that a
// key can be rotated by putting the new one first and re-sealing (Encrypted.Rekey) before the old
// one is dropped.
type Keyring struct {
	keys []ringKey
}

type ringKey struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// ErrNoKey: a record is sealed with a key the keyring does not hold.
var ErrNoKey = errors.New("sealed with a key that is not configured")

// ErrOpen: a record cannot be opened: it was changed, or sealed under another key (principal,
// upstream, kind), or with another key of the same id.
var ErrOpen = errors.New("cannot be opened: changed, moved to another key, or sealed with another key")

// NewKeyring returns the keyring of keys, each KeySize bytes; the first seals.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	if len(keys) > maxKeysInRing {
		return nil, fmt.Errorf("%d keys, at most %d are kept", len(keys), maxKeysInRing)
	}
	r := &Keyring{}
	seen := map[[keyIDSize]byte]bool{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("key %d of %d: expected %d bytes, got %d", i+1, len(keys), KeySize, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		rk := ringKey{id: keyID(k), aead: aead}
		if seen[rk.id] {
			return nil, fmt.Errorf("key %d of %d appears twice", i+1, len(keys))
		}
		seen[rk.id] = true
		r.keys = append(r.keys, rk)
	}
	return r, nil
}

func keyID(k []byte) [keyIDSize]byte {
	h := sha256.New()
	h.Write([]byte(keyIDDomain))
	h.Write([]byte{0})
	h.Write(k)
	var id [keyIDSize]byte
	copy(id[:], h.Sum(nil))
	return id
}

// PrimaryID is the id of the key that seals, in hex, for messages.
func (r *Keyring) PrimaryID() string { return hex.EncodeToString(r.keys[0].id[:]) }

// Len is the number of keys.
func (r *Keyring) Len() int { return len(r.keys) }

// additionalData binds a sealed record to its key and header: each field length-prefixed, so that no
// two keys encode alike.
func additionalData(header []byte, k Key) []byte {
	b := make([]byte, 0, len(aadDomain)+len(header)+len(k.Principal)+len(k.Upstream)+len(k.Kind)+16)
	b = append(b, aadDomain...)
	b = append(b, 0)
	b = append(b, header...)
	for _, f := range []string{k.Principal, k.Upstream, string(k.Kind)} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// Seal encrypts plaintext for the record k with the first key.
func (r *Keyring) Seal(k Key, plaintext []byte) ([]byte, error) {
	rk := r.keys[0]
	out := make([]byte, headerSize, headerSize+len(plaintext)+rk.aead.Overhead())
	out[0] = sealVersion
	copy(out[1:], rk.id[:])
	if _, err := rand.Read(out[1+keyIDSize : headerSize]); err != nil {
		return nil, err
	}
	header := out[:headerSize]
	return rk.aead.Seal(out, header[1+keyIDSize:], plaintext, additionalData(header, k)), nil
}

// Open decrypts the record k's sealed data: ErrNoKey when no key of the ring sealed it, ErrOpen when
// it does not authenticate.
func (r *Keyring) Open(k Key, sealed []byte) ([]byte, error) {
	rk, err := r.keyFor(sealed)
	if err != nil {
		return nil, err
	}
	header := sealed[:headerSize]
	plain, err := rk.aead.Open(nil, header[1+keyIDSize:], sealed[headerSize:], additionalData(header, k))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// SealedWithPrimary reports whether sealed was sealed with the key that seals now.
func (r *Keyring) SealedWithPrimary(sealed []byte) bool {
	rk, err := r.keyFor(sealed)
	return err == nil && rk.id == r.keys[0].id
}

func (r *Keyring) keyFor(sealed []byte) (ringKey, error) {
	if len(sealed) < headerSize+16 || sealed[0] != sealVersion {
		return ringKey{}, ErrOpen
	}
	for _, rk := range r.keys {
		if string(rk.id[:]) == string(sealed[1:1+keyIDSize]) {
			return rk, nil
		}
	}
	return ringKey{}, fmt.Errorf("%w (key id %s)", ErrNoKey, hex.EncodeToString(sealed[1:1+keyIDSize]))
}

// NewKey returns a fresh random key, base64 as ParseKeys reads it.
func NewKey() (string, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

// ParseKeys reads keys written as base64 (standard or URL alphabet, padded or not), separated by
// commas, spaces or newlines; lines starting with # are comments. The first is the one that seals.
// Messages never quote a key.
func ParseKeys(text string) ([][]byte, error) {
	var fields []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		fields = append(fields, strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' })...)
	}
	if len(fields) == 0 {
		return nil, errors.New("no key")
	}
	keys := make([][]byte, 0, len(fields))
	for i, f := range fields {
		k, err := decodeKey(f)
		if err != nil {
			return nil, fmt.Errorf("key %d of %d: %w", i+1, len(fields), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("expected %d bytes in base64 (44 characters; `toolgate credentials newkey` prints one), got %d bytes", KeySize, len(k))
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("expected base64 (%d bytes; `toolgate credentials newkey` prints one), got %d characters that are not", KeySize, len(s))
}

// KeySource says where the keys are: a file, or else an environment variable.
type KeySource struct {
	File string // one key a line (or comma-separated); must not be readable by group or others
	Env  string // the variable's name, when File is ""
	// LookupEnv reads Env; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
}

// LoadKeyring reads the keys src names. Its errors name the file or variable and what was expected;
// never a key.
func LoadKeyring(src KeySource) (*Keyring, error) {
	text, err := src.read()
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.name(), err)
	}
	r, err := NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.name(), err)
	}
	return r, nil
}

func (src KeySource) name() string {
	if src.File != "" {
		return "key file " + src.File
	}
	return "environment variable " + src.Env
}

func (src KeySource) read() (string, error) {
	if src.File == "" {
		lookup := src.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(src.Env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("%s is not set: expected a base64 %d-byte key (`toolgate credentials newkey` prints one)", src.name(), KeySize)
		}
		return v, nil
	}
	st, err := os.Stat(src.File)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s: %w", src.name(), err)
	}
	switch {
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("%s: expected a regular file", src.name())
	case st.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("%s: mode %#o lets other users read the key; expected 0600 or stricter (chmod 600 %s)",
			src.name(), st.Mode().Perm(), src.File)
	case st.Size() > 64<<10:
		return "", fmt.Errorf("%s: %d bytes, expected a few keys", src.name(), st.Size())
	}
	data, err := os.ReadFile(src.File)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src.name(), err)
	}
	return string(data), nil
}

// MaxSecretBytes bounds a per_user secret: a header value, not a document.
const MaxSecretBytes = 8 << 10

// CheckSecret checks a per_user secret (Kind Secret's data, the secret itself as the user gave it)
// before it is stored: not empty, at most MaxSecretBytes, and no control characters, since it goes
// into a request header (a CR or LF would split it). Its message never quotes the secret.
func CheckSecret(secret []byte) error {
	switch {
	case len(secret) == 0:
		return errors.New("the secret is empty")
	case len(secret) > MaxSecretBytes:
		return fmt.Errorf("the secret is %d bytes, at most %d are accepted", len(secret), MaxSecretBytes)
	}
	if secret[0] == ' ' || secret[len(secret)-1] == ' ' {
		return errors.New("the secret starts or ends with a space, which a request header would lose")
	}
	for i, c := range secret {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("the secret holds a control character at byte %d (a newline?); it goes into a request header", i+1)
		}
	}
	return nil
}
