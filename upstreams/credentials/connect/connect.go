// Package connect is the page where a user connects an upstream that acts as them: the signed link
// an authorization_required answer carries, the start of the authorization request (auth mode
// oauth), the callback that receives the code, and the form where a user pastes their own secret
// (auth mode per_user). It serves on the gateway's MCP listener, under Prefix, because that is the
// listener users' browsers can reach; the admin listener is for operators.
//
// It is its own package, beside the modes it serves (upstreams/credentials/useroauth, the per_user
// source), because it is the one browser-facing, unauthenticated surface of them: the link is the
// only authority, so its signing, the state of the authorization request and the replay guard live
// here together (docs/design.md, "Per-user upstream authorization").
//
//   - A link is the principal, the upstream, an expiry and a random nonce (so no two links are alike,
//     and using one leaves the others good), signed with HMAC-SHA256 under a key from
//     Options.Key (a random one per process when unset: links then die with the process and work on
//     that replica only).
//   - Opening a link shows a page naming the principal; nothing starts on GET (a link preview or a
//     scanner following it does nothing). Its button starts the authorization request.
//   - A link is used once: the authorization request it starts, or the secret it stores, takes it
//     (Options.Once, the vault's used-token set, shared by the replicas), and a second use is
//     refused, so a link read later in a shared transcript cannot replace the principal's upstream
//     identity.
//   - The request's state is sealed (AES-256-GCM under a key derived from Options.Key): the
//     principal, the upstream, the PKCE verifier, a nonce and an expiry travel in it, so any replica
//     can take the callback. A cookie holding the nonce binds the callback to the browser that
//     started the request, and a state is taken once (per replica; the authorization server also
//     refuses a second use of its code).
package connect

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// Prefix is the path under which the pages are served.
const Prefix = "/connect/"

// The defaults of Options.
const (
	DefaultLinkTTL  = 15 * time.Minute // a link in an authorization_required answer, opened soon after the call
	DefaultStateTTL = 10 * time.Minute // between the button and the callback
	maxSecretBytes  = 8 << 10          // what the secret form accepts
)

// Flow is an upstream in auth mode oauth, as the pages drive it (useroauth.Source).
type Flow interface {
	// Begin is principal's authorization request's URL, carrying the S256 challenge of verifier and
	// as its state what seal makes of the authorization server's issuer.
	Begin(ctx context.Context, principal, verifier string, seal func(issuer string) string) (string, error)
	// Complete exchanges code, with verifier, at issuer (the one Begin sealed) for principal's tokens
	// and stores them; it refuses when the upstream names another authorization server now.
	Complete(ctx context.Context, principal, issuer, code, verifier string) error
}

// Options configure the pages. BaseURL is required; the zero value of the rest works.
type Options struct {
	// BaseURL is the gateway's HTTP listener as users' browsers reach it, such as
	// "https://toolgate.example.com": links and the callback are under it.
	BaseURL string
	// Key signs links and seals states; at least 32 bytes. nil: random per process.
	Key      []byte
	LinkTTL  time.Duration // 0: DefaultLinkTTL
	StateTTL time.Duration // 0: DefaultStateTTL

	OAuth map[string]Flow // upstreams in auth mode oauth, by name
	// Secrets are the upstreams (auth mode per_user) whose users may paste their own secret; it is
	// stored in Vault as Kind Secret, Source "user", the bytes as pasted (surrounding space trimmed).
	Secrets map[string]bool
	Vault   vault.Store // required with Secrets
	// Once remembers the links used, until they expire; nil: Vault when it is a vault.Once (every
	// replica sharing the vault then refuses a second use), else this process's memory.
	Once vault.Once

	// ClientMetadataURL, when set, is the Client ID Metadata Document's URL; its path is served here.
	ClientMetadataURL string
	ClientMetadata    []byte

	Now func() time.Time
	Log *slog.Logger
}

// Links makes the signed links and serves the pages.
type Links struct {
	o        Options
	base     atomic.Pointer[url.URL] // SetBaseURL may change it once the listener is open
	linkKey  []byte
	stateKey []byte
	now      func() time.Time
	log      *slog.Logger

	once vault.Once

	mu   sync.Mutex
	used map[string]time.Time // state nonces taken, until they expire
}

// New checks o and returns the pages.
func New(o Options) (*Links, error) {
	base, err := parseBase(o.BaseURL)
	if err != nil {
		return nil, err
	}
	if len(o.Secrets) > 0 && o.Vault == nil {
		return nil, errors.New("connect: Secrets need a Vault")
	}
	key := o.Key
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if len(key) < 32 {
		return nil, errors.New("connect: Key must be at least 32 bytes")
	}
	o.LinkTTL = cmp.Or(o.LinkTTL, DefaultLinkTTL)
	o.StateTTL = cmp.Or(o.StateTTL, DefaultStateTTL)
	l := &Links{o: o, linkKey: derive(key, "link"), stateKey: derive(key, "state"), now: o.Now, log: o.Log,
		used: map[string]time.Time{}}
	l.base.Store(base)
	l.once = o.Once
	if vo, ok := o.Vault.(vault.Once); ok && l.once == nil {
		l.once = vo
	}
	if l.once == nil {
		l.once = &vault.Memory{}
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

func parseBase(raw string) (*url.URL, error) {
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, errors.New("connect: BaseURL must be an http(s) URL")
	}
	return base, nil
}

// SetBaseURL changes the base URL: the gateway sets its listener's address once it is open, when
// none was configured. Links made before stay valid where they lead.
func (l *Links) SetBaseURL(raw string) error {
	base, err := parseBase(raw)
	if err != nil {
		return err
	}
	l.base.Store(base)
	return nil
}

// secure reports whether the base URL is https: cookies are then Secure.
func (l *Links) secure() bool { return l.base.Load().Scheme == "https" }

// derive is a key for one purpose, so that a link signature is never a state key.
func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("toolgate-connect/" + purpose))
	return m.Sum(nil)
}

// RedirectURL is the callback the authorization servers send users back to.
func (l *Links) RedirectURL() string { return RedirectURL(l.base.Load().String()) }

// RedirectURL is the callback under baseURL (Options.BaseURL), for the flows built before Links.
func RedirectURL(baseURL string) string {
	return strings.TrimSuffix(baseURL, "/") + Prefix + "callback"
}

// URL is the link where principal connects upstream, valid for the link TTL.
func (l *Links) URL(principal, upstream string) string {
	exp, nonce := strconv.FormatInt(l.now().Add(l.o.LinkTTL).Unix(), 10), randomString(12)
	q := url.Values{"p": {principal}, "u": {upstream}, "e": {exp}, "n": {nonce}, "s": {l.sign(principal, upstream, exp, nonce)}}
	return l.base.Load().String() + Prefix + "?" + q.Encode()
}

func (l *Links) sign(principal, upstream, exp, nonce string) string {
	m := hmac.New(sha256.New, l.linkKey)
	m.Write([]byte(principal + "\x00" + upstream + "\x00" + exp + "\x00" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// link is a verified link's content.
type link struct {
	principal, upstream, exp, nonce, sig string
}

// errBadLink is every reason a link is not honoured; the page does not say which.
var errBadLink = errors.New("this link is not valid or has expired: repeat the call to get a new one")

// verify checks the link in v (query or form): its signature, then its expiry.
func (l *Links) verify(v url.Values) (link, error) {
	k := link{principal: v.Get("p"), upstream: v.Get("u"), exp: v.Get("e"), nonce: v.Get("n"), sig: v.Get("s")}
	want := l.sign(k.principal, k.upstream, k.exp, k.nonce)
	if k.principal == "" || k.nonce == "" || !hmac.Equal([]byte(want), []byte(k.sig)) {
		return link{}, errBadLink
	}
	exp, err := strconv.ParseInt(k.exp, 10, 64)
	if err != nil || !l.now().Before(time.Unix(exp, 0)) {
		return link{}, errBadLink
	}
	return k, nil
}

func (k link) values() url.Values {
	return url.Values{"p": {k.principal}, "u": {k.upstream}, "e": {k.exp}, "n": {k.nonce}, "s": {k.sig}}
}

// errUsedLink: the link already started an authorization or stored a secret.
var errUsedLink = errors.New("this link was already used: repeat the call to get a new one")

// takeLink marks k used until it expires; false when it already was.
func (l *Links) takeLink(ctx context.Context, k link) (bool, error) {
	exp, _ := strconv.ParseInt(k.exp, 10, 64) // verified
	return l.once.TakeOnce(ctx, "connect-link:"+k.sig, time.Unix(exp, 0))
}

// take marks a state's nonce used; false when it already was.
func (l *Links) take(nonce string, until time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for n, t := range l.used {
		if now.After(t) {
			delete(l.used, n)
		}
	}
	if _, ok := l.used[nonce]; ok {
		return false
	}
	l.used[nonce] = until
	return true
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookieName is the cookie binding the state with nonce to its browser.
func cookieName(nonce string) string { return fmt.Sprintf("toolgate_connect_%.16s", nonce) }
