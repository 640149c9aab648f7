package credentials

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/upstreams/egress"
)

// Mode is how an upstream's requests are authorized: auth.mode in the config.
type Mode string

// The modes of an upstream's auth block.
const (
	Static            Mode = "static"             // the configured headers only; this package is not used
	ClientCredentials Mode = "client_credentials" // the gateway's own token (RFC 6749 section 4.4)
	TokenExchange     Mode = "token_exchange"     // the caller's JWT exchanged for the upstream (RFC 8693)
	OAuth             Mode = "oauth"              // each user's own authorization (code + PKCE), kept in the vault
	PerUser           Mode = "per_user"           // each user's own secret, kept in the vault (PerUserSource)
)

// RFC 8693 identifiers.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
)

// DefaultMaxCached bounds the exchanged tokens kept per upstream when Options.MaxCached is 0.
const DefaultMaxCached = 10000

// fetchTimeout bounds one request to the token endpoint, whoever waits for it.
const fetchTimeout = 10 * time.Second

// failureHoldoff is how long a failed fetch is the answer for a token with no usable value, so that
// an authorization server that is down gets one request per holdoff, not one per call.
const failureHoldoff = time.Second

// defaultLifetime is how long a token the token endpoint gave no expires_in for is kept.
const defaultLifetime = 5 * time.Minute

// Caller is who made the request being authorized.
type Caller struct {
	Principal string
	// Token is the caller's inbound JWT as it presented it; "" when it authenticated otherwise (an API
	// key, the stdio client, anonymous). Never logged, never sent upstream.
	Token string
}

// Options configure one upstream's Source.
type Options struct {
	Server   string // the upstream's name, for messages
	Mode     Mode   // ClientCredentials or TokenExchange
	TokenURL string // the authorization server's token endpoint

	// The gateway's client at the authorization server (client_secret_basic).
	ClientID, ClientSecret string

	Scopes   []string // scope, space-separated on the wire
	Audience string   // audience (RFC 8693), sent when set
	Resource string   // resource (RFC 8707), sent when set: the upstream's URL, usually

	// SubjectTokenType is how the inbound JWT is presented for exchange: TokenTypeAccessToken (the
	// default) or TokenTypeJWT.
	SubjectTokenType string
	// FallbackClientCredentials makes a caller without a JWT use the gateway's client-credentials token
	// for this upstream instead of being refused (token_exchange only).
	FallbackClientCredentials bool

	// Caller returns who made the request whose context ctx is; ok is false for a request no caller
	// made (the gateway's own: initialize, listing, the listening stream). Required for TokenExchange.
	Caller func(ctx context.Context) (c Caller, ok bool)

	// HTTPClient is for the token endpoint; nil: a client that refuses redirects and dials through an
	// egress guard with Egress (the upstream's egress settings: public addresses only unless they allow more).
	HTTPClient *http.Client
	Egress     egress.Options
	Now        func() time.Time // time.Now when nil
	Log        *slog.Logger     // nil discards
	MaxCached  int              // exchanged tokens kept; 0: DefaultMaxCached
}

// Error is a request that was not sent upstream because it could not be given a credential. Its
// message names the upstream, the token endpoint's host and what failed; never a token or a secret.
type Error struct {
	Server string
	// Refused is true when the caller cannot be served by this upstream whatever happens (it has no JWT
	// to exchange and no fallback is configured): repeating the call cannot help.
	Refused bool
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("no credential for upstream %q: %v", e.Server, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// CallerRefused is Refused, for upstreams.CredentialError (which does not import this package).
func (e *Error) CallerRefused() bool { return e.Refused }

// errClosed: the Source was closed, so it fetches nothing more.
var errClosed = errors.New("the credential source is closed")

// ErrNoSubjectToken is why a caller without a JWT is refused by a token_exchange upstream.
var ErrNoSubjectToken = errors.New("the upstream acts as the caller (token_exchange) and needs the caller's JWT; " +
	"this caller authenticated without one (an API key, stdio or anonymous)")

// Source gives the Authorization header value of each request to one upstream. It is safe for
// concurrent use; Close waits for the token requests it started.
type Source struct {
	o     Options
	now   func() time.Time
	log   *slog.Logger
	cc    *ccFetcher
	gw    *slot // the gateway's own token (client credentials)
	cache *lru  // exchanged tokens (token_exchange)
	base  context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	host  string // the token endpoint's host, for messages
}

// New checks o and returns the upstream's Source.
func New(o Options) (*Source, error) {
	switch o.Mode {
	case ClientCredentials, TokenExchange:
	default:
		return nil, fmt.Errorf("credentials: mode %q has no token source", o.Mode)
	}
	u, err := url.Parse(o.TokenURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("credentials: upstream %q: token_url must be an http(s) URL", o.Server)
	}
	if o.ClientID == "" {
		return nil, fmt.Errorf("credentials: upstream %q: client_id is required", o.Server)
	}
	if o.Mode == TokenExchange && o.Caller == nil {
		return nil, fmt.Errorf("credentials: upstream %q: token_exchange needs Options.Caller", o.Server)
	}
	o.SubjectTokenType = cmp.Or(o.SubjectTokenType, TokenTypeAccessToken)
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport: egress.New(o.Egress).Transport(),
			Timeout:   fetchTimeout,
			// A redirect would carry the client's credentials to wherever the endpoint points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	s := &Source{o: o, now: o.Now, log: o.Log, host: u.Host}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.base, s.stop = context.WithCancel(context.Background())
	s.cc = newCCFetcher(o)
	s.gw = &slot{}
	s.cache = newLRU(cmp.Or(o.MaxCached, DefaultMaxCached))
	return s, nil
}

// Close stops the token requests in flight and waits for them.
func (s *Source) Close() {
	s.stop()
	s.wg.Wait()
}

// Authorization is the Authorization header value for a request made in ctx: "Bearer <token>". A
// request that cannot get one must not be sent; the error is an *Error.
func (s *Source) Authorization(ctx context.Context) (string, error) {
	if s.o.Mode == ClientCredentials {
		return s.gateway(ctx)
	}
	c, ok := s.o.Caller(ctx)
	switch {
	case !ok:
		return s.gateway(ctx) // the gateway's own request: listing, the handshake, the listening stream
	case c.Token == "" && s.o.FallbackClientCredentials:
		return s.gateway(ctx)
	case c.Token == "":
		return "", &Error{Server: s.o.Server, Refused: true, Err: ErrNoSubjectToken}
	}
	sum := sha256.Sum256([]byte(c.Token))
	key := c.Principal + "\x00" + hex.EncodeToString(sum[:])
	token := c.Token
	return s.get(ctx, s.cache.slot(key, s.now()), "token_exchange", c.Principal, func(fctx context.Context) (grant, error) {
		return s.exchange(fctx, token)
	})
}

// Rejected tells the source the upstream answered 401 to a request that carried authorization: a
// cached token with that value is dropped, so the next request fetches a new one.
func (s *Source) Rejected(ctx context.Context, authorization string) {
	s.gw.drop(authorization)
	if s.o.Mode != TokenExchange {
		return
	}
	if c, ok := s.o.Caller(ctx); ok && c.Token != "" {
		sum := sha256.Sum256([]byte(c.Token))
		s.cache.drop(c.Principal+"\x00"+hex.EncodeToString(sum[:]), authorization)
	}
}

func (s *Source) gateway(ctx context.Context) (string, error) {
	return s.get(ctx, s.gw, "client_credentials", "", func(fctx context.Context) (grant, error) {
		return s.cc.fetch(fctx, s.now)
	})
}

// grant is one token as cached: the header value and when it is refreshed and given up.
type grant struct {
	value     string    // "Bearer <token>"
	refreshAt time.Time // from then on one refresh is started; the value is still used meanwhile
	expiry    time.Time // from then on the value is not used
}

// newGrant is a token fetched at start that lives lifetime: it is refreshed a tenth of its life (at
// most 30s) before it expires and no longer used a twentieth (at most 5s) before, so that it does not
// expire on its way upstream.
func newGrant(token string, start time.Time, lifetime time.Duration) grant {
	if lifetime <= 0 {
		lifetime = defaultLifetime
	}
	return grant{
		value:     "Bearer " + token,
		refreshAt: start.Add(lifetime - min(30*time.Second, lifetime/10)),
		expiry:    start.Add(lifetime - min(5*time.Second, lifetime/20)),
	}
}

// slot is one cached token with at most one fetch of it in flight.
type slot struct {
	mu       sync.Mutex
	g        grant
	flight   *flight
	failed   error
	failedAt time.Time
	used     time.Time // for the LRU's sweep
}

type flight struct {
	done chan struct{}
	g    grant
	err  error
}

func (sl *slot) drop(value string) {
	sl.mu.Lock()
	if sl.g.value == value {
		sl.g = grant{}
	}
	sl.mu.Unlock()
}

// get returns sl's token, fetching it when it is due: a valid token is returned at once; a token due
// for refresh but still usable is returned at once while one fetch runs; with no usable token the
// caller waits for the one fetch in flight (or its own context). A fetch that failed is the answer
// for failureHoldoff.
func (s *Source) get(ctx context.Context, sl *slot, kind, principal string, fetch func(context.Context) (grant, error)) (string, error) {
	sl.mu.Lock()
	now := s.now()
	sl.used = now
	if sl.g.value != "" && now.Before(sl.g.refreshAt) {
		v := sl.g.value
		sl.mu.Unlock()
		return v, nil
	}
	usable := sl.g.value != "" && now.Before(sl.g.expiry)
	if sl.flight == nil {
		if sl.failed != nil && now.Before(sl.failedAt.Add(failureHoldoff)) {
			// Held back: the still-usable token if there is one, else the failure.
			if usable {
				v := sl.g.value
				sl.mu.Unlock()
				return v, nil
			}
			err := sl.failed
			sl.mu.Unlock()
			return "", err
		}
		if s.base.Err() != nil {
			sl.mu.Unlock()
			return "", &Error{Server: s.o.Server, Err: errClosed}
		}
		s.start(sl, kind, principal, fetch)
	}
	if usable {
		v := sl.g.value
		sl.mu.Unlock()
		return v, nil
	}
	f := sl.flight
	sl.mu.Unlock()
	select {
	case <-f.done:
		if f.err != nil {
			return "", f.err
		}
		return f.g.value, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start runs one fetch for sl on a goroutine of its own, so that the caller that started it may leave
// (its deadline) without failing the others waiting. sl.mu is held.
func (s *Source) start(sl *slot, kind, principal string, fetch func(context.Context) (grant, error)) {
	f := &flight{done: make(chan struct{})}
	sl.flight = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.base, fetchTimeout)
		defer cancel()
		g, err := fetch(ctx)
		if err != nil {
			err = &Error{Server: s.o.Server, Err: err}
			attrs := []any{"server", s.o.Server, "grant", kind, "err", err.Error()}
			if principal != "" {
				attrs = append(attrs, "principal", principal)
			}
			s.log.Warn("could not get a token for the upstream; its requests are not sent", attrs...)
		}
		sl.mu.Lock()
		if err == nil {
			sl.g, sl.failed = g, nil
		} else {
			sl.failed, sl.failedAt = err, s.now()
		}
		sl.flight = nil
		f.g, f.err = g, err
		close(f.done)
		sl.mu.Unlock()
	}()
}

// describe is a fetch error as messages may carry it: the token endpoint's host and what failed,
// without the URL's path or query (which could carry anything) or the body the server sent.
func (s *Source) describe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("token endpoint at %s: %w", s.host, err)
}

// lru is the bounded cache of exchanged tokens, one slot per (principal, inbound token hash).
type lru struct {
	mu    sync.Mutex
	max   int
	slots map[string]*slot
}

func newLRU(max int) *lru { return &lru{max: max, slots: map[string]*slot{}} }

// slot returns key's slot, making one; when the cache is full it first drops the slots whose tokens
// have expired and none in flight, then, if that freed nothing, the least recently used.
func (c *lru) slot(key string, now time.Time) *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sl, ok := c.slots[key]; ok {
		return sl
	}
	if len(c.slots) >= c.max {
		c.evict(now)
	}
	sl := &slot{used: now}
	c.slots[key] = sl
	return sl
}

func (c *lru) evict(now time.Time) {
	var oldestKey string
	var oldest time.Time
	for k, sl := range c.slots {
		sl.mu.Lock()
		expired := sl.flight == nil && !now.Before(sl.g.expiry)
		used := sl.used
		sl.mu.Unlock()
		if expired {
			delete(c.slots, k)
			continue
		}
		if oldestKey == "" || used.Before(oldest) {
			oldestKey, oldest = k, used
		}
	}
	if len(c.slots) >= c.max && oldestKey != "" {
		delete(c.slots, oldestKey)
	}
}

func (c *lru) drop(key, value string) {
	c.mu.Lock()
	sl := c.slots[key]
	c.mu.Unlock()
	if sl != nil {
		sl.drop(value)
	}
}

// len is the number of slots, for tests.
func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots)
}

// scopeParam is scopes as the scope parameter.
func scopeParam(scopes []string) string { return strings.Join(scopes, " ") }
