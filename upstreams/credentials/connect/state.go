package connect

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// state is what travels, sealed, through the authorization server in the state parameter.
type state struct {
	Principal string `json:"p"`
	Upstream  string `json:"u"`
	Verifier  string `json:"v"` // PKCE: only the challenge goes to the authorization server
	Nonce     string `json:"n"` // the cookie's value, and the replay guard's key
	Issuer    string `json:"i"` // the authorization server the request went to: the code is exchanged there only
	Expires   int64  `json:"e"`
}

var errBadState = errors.New("this authorization request is not valid, has expired, or was already completed: " +
	"start again from the link")

// seal encrypts and authenticates st (AES-256-GCM, a random 96-bit nonce in front).
func (l *Links) seal(st state) string {
	plain, _ := json.Marshal(st)
	gcm := l.gcm()
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(gcm.Seal(nonce, nonce, plain, []byte("toolgate-connect-state")))
}

// open is the state sealed in s, if it was sealed here and has not expired.
func (l *Links) open(s string) (state, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	gcm := l.gcm()
	if err != nil || len(raw) < gcm.NonceSize() {
		return state{}, errBadState
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], []byte("toolgate-connect-state"))
	if err != nil {
		return state{}, errBadState
	}
	var st state
	if json.Unmarshal(plain, &st) != nil || !l.now().Before(time.Unix(st.Expires, 0)) {
		return state{}, errBadState
	}
	return st, nil
}

func (l *Links) gcm() cipher.AEAD {
	block, _ := aes.NewCipher(l.stateKey) // 32 bytes: AES-256
	gcm, _ := cipher.NewGCM(block)
	return gcm
}
