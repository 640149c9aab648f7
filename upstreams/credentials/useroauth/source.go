package useroauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// requestTimeout bounds one request to the upstream or its authorization server made here.
const requestTimeout = 10 * time.Second

// discoveryLifetime is how long what discovery learned is reused before the upstream is asked
// again: an hour, so a moved authorization server is followed without a request per call.
const discoveryLifetime = time.Hour

// Options configure one upstream's Source. Server, URL, RedirectURL, ListAs, Vault and Caller are
// required.
type Options struct {
	Server string // the upstream's name (mcpServers.<name>)
	URL    string // the upstream's MCP endpoint
	// Resource is the resource parameter (RFC 8707); "" for the one its protected-resource metadata
	// names (else URL).
	Resource string
	// ClientID and ClientSecret are a client registered beforehand at the authorization server
	// (the secret may be empty: a public client). "" to use a metadata document or dynamic
	// registration.
	ClientID, ClientSecret string
	// Issuer is the authorization server the upstream must name (auth.issuer); "" for whichever it
	// names (a configured client with a secret is then pinned to the first one it is used with).
	Issuer string
	// ClientMetadataURL is the https URL where the gateway serves its Client ID Metadata Document;
	// used as client_id where the authorization server supports them.
	ClientMetadataURL string
	Scopes            []string      // asked for; nil for what the upstream names
	RedirectURL       func() string // the gateway's callback (package connect), known once it listens
	// ListAs is the principal whose token the gateway's own requests (initialize, listing, the listening
	// stream) carry; required. What they see upstream is listed to every caller the policy allows.
	ListAs string

	Vault vault.Store
	// Caller is the principal whose request ctx is; ok is false for the gateway's own requests.
	Caller func(ctx context.Context) (principal string, ok bool)
	// ConnectURL is where principal connects this upstream: the authorization_required message
	// carries it.
	ConnectURL func(principal, upstream string) string
	// OnConnect is called after a principal connected (the gateway retries a down upstream at once).
	OnConnect func(principal string)
	// AskURL offers the connect link to the caller whose request ctx is, by URL-mode elicitation where
	// their client declared it (message says what it is for); true when they accepted, that is, they
	// are opening it. The request then waits for them to connect (within its own deadline) instead
	// of answering authorization_required. nil: never offered.
	AskURL func(ctx context.Context, message, url string) bool

	// Egress is the upstream's egress guard settings: the discovery, registration and token requests
	// are dialled through the guard (public addresses only unless they allow more), as the upstream's are.
	Egress     egress.Options
	HTTPClient *http.Client     // nil: one through the egress guard that refuses redirects, with a 10s timeout
	Now        func() time.Time // time.Now when nil
	Log        *slog.Logger     // nil discards
}

// Source authorizes each request to one upstream with the token of the principal making it.
type Source struct {
	o    Options
	http *http.Client
	now  func() time.Time
	log  *slog.Logger

	regMu sync.Mutex // one dynamic registration at a time

	mu    sync.Mutex
	disc  *Discovery
	discd time.Time             // when disc was learned
	users map[string]*userToken // by principal
	// connecting is, per principal, closed when they connect: what a request waits on after they
	// accepted the link by elicitation.
	connecting map[string]chan struct{}
	// stepUp is, per principal, the scope the upstream said a request lacked (403 insufficient_scope):
	// their next authorization request asks for it too.
	stepUp map[string]string
}

// New checks o and returns the upstream's Source.
func New(o Options) (*Source, error) {
	switch {
	case o.Server == "" || o.URL == "" || o.RedirectURL == nil:
		return nil, errors.New("useroauth: Server, URL and RedirectURL are required")
	case strings.TrimSpace(o.ListAs) == "":
		return nil, fmt.Errorf("useroauth: upstream %q: ListAs is required (the principal whose view of the upstream is listed to everyone)", o.Server)
	case o.Vault == nil || o.Caller == nil:
		return nil, errors.New("useroauth: Vault and Caller are required")
	}
	if _, err := url.Parse(o.URL); err != nil {
		return nil, fmt.Errorf("useroauth: upstream %q: %w", o.Server, err)
	}
	s := &Source{o: o, http: o.HTTPClient, now: o.Now, log: o.Log, users: map[string]*userToken{}}
	if s.http == nil {
		s.http = &http.Client{Timeout: requestTimeout, Transport: egress.New(o.Egress).Transport(),
			// A redirect would carry a code, a refresh token or a client secret wherever it points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Token is one principal's tokens for the upstream, as kept in the vault (Kind OAuth).
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: the server said nothing; used until refused
	Obtained     time.Time `json:"obtained"`
	Scope        string    `json:"scope,omitempty"`
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	Resource     string    `json:"resource"`
}

// due reports whether t should be refreshed at now: a tenth of its life (at most 30s) before it
// expires, so that it does not expire on its way upstream.
func (t *Token) due(now time.Time) bool {
	if t.Expiry.IsZero() {
		return false
	}
	margin := min(30*time.Second, t.Expiry.Sub(t.Obtained)/10)
	return !now.Before(t.Expiry.Add(-margin))
}

// userToken is one principal's token in memory, with at most one refresh of it at a time.
type userToken struct {
	lock     chan struct{} // capacity 1: held while the token is loaded or refreshed
	mu       sync.Mutex
	tok      *Token
	rejected string // an access token the upstream refused: not used again
}

func (u *userToken) current(now time.Time) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tok == nil || u.tok.due(now) || u.tok.AccessToken == u.rejected {
		return "", false
	}
	return u.tok.AccessToken, true
}

func (u *userToken) set(t *Token) {
	u.mu.Lock()
	u.tok = t
	u.mu.Unlock()
}

func (s *Source) user(principal string) *userToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[principal]
	if !ok {
		u = &userToken{lock: make(chan struct{}, 1)}
		s.users[principal] = u
	}
	return u
}

// needsAuthorization is the error of a call not sent because principal has not connected the upstream
// (or their token can no longer be used): it answers authorization_required with the link.
func (s *Source) needsAuthorization(principal string, rejected bool) error {
	e := &credentials.AuthorizationRequiredError{Server: s.o.Server, Mode: credentials.OAuth, Rejected: rejected}
	if s.o.ConnectURL != nil {
		e.ConnectURL = s.o.ConnectURL(principal, s.o.Server)
	}
	return e
}

// Authorization is the Authorization header value for a request made in ctx: the caller's token,
// refreshed when due. A caller with no token gets an *AuthorizationRequiredError.
func (s *Source) Authorization(ctx context.Context) (string, error) {
	principal, ok := s.o.Caller(ctx)
	if !ok {
		tok, err := s.listerToken(ctx)
		if err != nil {
			return "", err
		}
		return "Bearer " + tok, nil
	}
	tok, err := s.callerToken(ctx, principal)
	if err != nil {
		return "", err
	}
	return "Bearer " + tok, nil
}

// callerToken is token for a caller; when they must connect first and their client takes the link
// by URL-mode elicitation and they accept, it waits for them to connect (or the request's end).
func (s *Source) callerToken(ctx context.Context, principal string) (string, error) {
	tok, err := s.token(ctx, principal)
	var ar *credentials.AuthorizationRequiredError
	if err == nil || s.o.AskURL == nil || !errors.As(err, &ar) || ar.ConnectURL == "" {
		return tok, err
	}
	connected := s.connectSignal(principal) // taken before asking: a quick connect is not missed
	if !s.o.AskURL(ctx, ar.AuthorizationRequired(), ar.ConnectURL) {
		return "", err
	}
	select {
	case <-connected:
		return s.token(ctx, principal)
	case <-ctx.Done():
		return "", err
	}
}

// connectSignal is closed when principal next connects.
func (s *Source) connectSignal(principal string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connecting == nil {
		s.connecting = map[string]chan struct{}{}
	}
	ch, ok := s.connecting[principal]
	if !ok {
		ch = make(chan struct{})
		s.connecting[principal] = ch
	}
	return ch
}

// connected wakes the requests waiting for principal to connect.
func (s *Source) connected(principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.connecting[principal]; ok {
		close(ch)
		delete(s.connecting, principal)
	}
}

// Rejected tells the source the upstream answered 401 to a request that carried authorization: that
// token is not used again; the next request refreshes it, or asks the caller to connect again.
func (s *Source) Rejected(ctx context.Context, authorization string) {
	principal, ok := s.o.Caller(ctx)
	if !ok {
		principal = s.lister()
	}
	u := s.user(principal)
	u.mu.Lock()
	if u.tok != nil && "Bearer "+u.tok.AccessToken == authorization {
		u.rejected = u.tok.AccessToken
	}
	u.mu.Unlock()
}

// RejectedError is what a caller's request answers when the upstream refused their token even after
// a refresh (upstreams.CallerRejecter): the token is deleted and they are asked to connect again. nil
// for the gateway's own requests.
func (s *Source) RejectedError(ctx context.Context) error {
	principal, ok := s.o.Caller(ctx)
	if !ok {
		return nil
	}
	if err := s.o.Vault.Delete(ctx, s.key(principal)); err != nil && !errors.Is(err, vault.ErrNotFound) {
		return fmt.Errorf("the vault: %w", err)
	}
	s.user(principal).set(nil)
	s.log.Info("the upstream refused a user's token even after a refresh; they are asked to connect again",
		"server", s.o.Server, "principal", principal)
	return s.needsAuthorization(principal, true)
}

// lister is the principal whose token the gateway's own requests carry: Options.ListAs, whom the
// operator chose. Never a principal picked among those who connected: what the lister sees upstream
// is listed to every caller, and anyone could otherwise become the lister by connecting under a name
// that sorts first.
func (s *Source) lister() string { return s.o.ListAs }

// listerToken is ListAs's token for the gateway's own requests. When they have not connected (or
// their authorization ended) the error says so without their link: it goes to the log.
func (s *Source) listerToken(ctx context.Context) (string, error) {
	tok, err := s.token(ctx, s.o.ListAs)
	if ar := (*credentials.AuthorizationRequiredError)(nil); errors.As(err, &ar) {
		return "", fmt.Errorf("list_as principal %q has not connected upstream %q (auth mode oauth), or their "+
			"authorization ended; it is listed once they connect (an operator gets their link from GET /v1/connect-link)",
			s.o.ListAs, s.o.Server)
	}
	return tok, err
}

func (s *Source) key(principal string) vault.Key {
	return vault.Key{Principal: principal, Upstream: s.o.Server, Kind: vault.OAuth}
}

// token is principal's access token: the one in memory while it is good; else, one caller at a time
// per principal, the vault's (another replica may have refreshed it), refreshed when due.
func (s *Source) token(ctx context.Context, principal string) (string, error) {
	u := s.user(principal)
	if v, ok := u.current(s.now()); ok {
		return v, nil
	}
	select {
	case u.lock <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-u.lock }()
	if v, ok := u.current(s.now()); ok { // refreshed by the caller we waited for
		return v, nil
	}
	t, err := s.load(ctx, principal)
	if err != nil {
		return "", err
	}
	u.mu.Lock()
	rejected := u.rejected
	u.mu.Unlock()
	if !t.due(s.now()) && t.AccessToken != rejected {
		u.set(t)
		return t.AccessToken, nil
	}
	if t, err = s.refresh(ctx, principal, t); err != nil {
		return "", err
	}
	u.set(t)
	return t.AccessToken, nil
}

// load reads principal's token from the vault; none is an *AuthorizationRequiredError.
func (s *Source) load(ctx context.Context, principal string) (*Token, error) {
	data, _, err := s.o.Vault.Get(ctx, s.key(principal))
	if errors.Is(err, vault.ErrNotFound) {
		return nil, s.needsAuthorization(principal, false)
	}
	if err != nil {
		return nil, fmt.Errorf("the vault: %w", err)
	}
	var t Token
	if err := json.Unmarshal(data, &t); err != nil || t.AccessToken == "" {
		return nil, fmt.Errorf("the vault holds an unreadable token for upstream %q", s.o.Server)
	}
	return &t, nil
}

// refresh trades t's refresh token for new tokens and stores them, the rotated refresh token
// with them. A refusal (invalid_grant: revoked, expired, already rotated) deletes the token, unless
// another replica stored a newer one meanwhile, and asks the caller to connect again.
func (s *Source) refresh(ctx context.Context, principal string, t *Token) (*Token, error) {
	if t.RefreshToken == "" {
		return nil, s.forget(ctx, principal, t)
	}
	d, r, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	if !sameIssuer(t.Issuer, d.Server.Issuer) {
		// The upstream names another authorization server than the one that issued the token: the
		// refresh token is that server's secret, never sent anywhere else.
		s.log.Warn("the upstream names another authorization server than the one that issued a user's token; "+
			"the token is not refreshed there and the user is asked to connect again",
			"server", s.o.Server, "principal", principal, "issued_by", clip(t.Issuer), "now_named", clip(d.Server.Issuer))
		return nil, s.forget(ctx, principal, t)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	start := s.now()
	nt, err := s.refreshRequest(ctx, d, r, t.RefreshToken)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_token") {
			s.log.Info("the upstream's authorization server refused a refresh; the user is asked to connect again",
				"server", s.o.Server, "principal", principal, "error", clip(re.ErrorCode))
			return nil, s.forget(ctx, principal, t)
		}
		return nil, fmt.Errorf("refreshing the token for upstream %q at %s: %w", s.o.Server, hostOf(d.Server.TokenEndpoint), tokenError(err))
	}
	fresh := s.record(nt, start, d, r)
	if fresh.RefreshToken == "" {
		fresh.RefreshToken = t.RefreshToken // not rotated: the old one stays good
	}
	if err := s.store(ctx, principal, fresh, "refresh"); err != nil {
		return nil, err
	}
	return fresh, nil
}

// sameIssuer compares issuer identifiers as discovery does (serverMetadata): a trailing slash aside,
// exactly.
func sameIssuer(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// forget deletes principal's token t (unless the vault now holds another) and asks them to connect.
func (s *Source) forget(ctx context.Context, principal string, t *Token) error {
	if now, err := s.load(ctx, principal); err == nil && now.RefreshToken != t.RefreshToken && now.AccessToken != t.AccessToken {
		return fmt.Errorf("the token for upstream %q was replaced while it was refreshed; repeat the call", s.o.Server)
	}
	if err := s.o.Vault.Delete(ctx, s.key(principal)); err != nil && !errors.Is(err, vault.ErrNotFound) {
		return fmt.Errorf("the vault: %w", err)
	}
	s.user(principal).set(nil)
	return s.needsAuthorization(principal, false)
}

func (s *Source) record(t *oauth2.Token, start time.Time, d *Discovery, r *Registration) *Token {
	rec := &Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Obtained: start,
		Issuer: d.Server.Issuer, ClientID: r.ClientID, Resource: d.Resource}
	switch {
	case t.ExpiresIn > 0:
		rec.Expiry = start.Add(time.Duration(t.ExpiresIn) * time.Second)
	case !t.Expiry.IsZero():
		rec.Expiry = t.Expiry
	}
	if sc, ok := t.Extra("scope").(string); ok {
		rec.Scope = sc
	}
	return rec
}

func (s *Source) store(ctx context.Context, principal string, t *Token, how string) error {
	data, _ := json.Marshal(t)
	e := vault.Entry{Key: s.key(principal), Updated: s.now(), Source: how}
	if t.RefreshToken == "" {
		e.Expires = t.Expiry
	}
	if err := s.o.Vault.Put(ctx, e, data); err != nil {
		return fmt.Errorf("the vault: %w", err)
	}
	return nil
}

// client is what discovery learned (reused for discoveryLifetime) and the client to use there.
func (s *Source) client(ctx context.Context) (*Discovery, *Registration, error) {
	d, err := s.discovery(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.registration(ctx, d)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %q: %w", s.o.Server, err)
	}
	return d, r, nil
}

func (s *Source) discovery(ctx context.Context) (*Discovery, error) {
	s.mu.Lock()
	if s.disc != nil && s.now().Sub(s.discd) < discoveryLifetime {
		d := s.disc
		s.mu.Unlock()
		return d, nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	d, err := s.discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: discovering its authorization server: %w", s.o.Server, err)
	}
	s.mu.Lock()
	s.disc, s.discd = d, s.now()
	s.mu.Unlock()
	return d, nil
}

// clientContext makes x/oauth2 use the source's HTTP client.
func (s *Source) clientContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.http)
}

// tokenError is err without what the server's body said beyond its OAuth error code: x/oauth2's
// message quotes the body, and a body may echo what was sent.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("answered HTTP %d, error %q", status, clip(re.ErrorCode))
	}
	return urlErr(err)
}

// Begin is the authorization request's URL for principal: the state is what seal makes of the
// authorization server's issuer (package connect seals it, so the callback exchanges the code where
// the request began), the PKCE verifier is the caller's; resource names the upstream; the scope is
// the usual one, with what the upstream last said principal lacked (step-up).
func (s *Source) Begin(ctx context.Context, principal, verifier string, seal func(issuer string) string) (string, error) {
	d, r, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	cfg := s.oauthConfig(d, r)
	cfg.Scopes = unionScopes(cfg.Scopes, s.stepUpScope(principal))
	return cfg.AuthCodeURL(seal(d.Server.Issuer), oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.Resource)), nil
}

// InsufficientScope is the upstream's 403 insufficient_scope to a request of the caller's
// (upstreams.ScopeChallenger): the scope its challenge names is remembered for the caller's next
// authorization request, and the call answers authorization_required with the link, so the user
// consents to more and repeats the call. nil for the gateway's own requests.
func (s *Source) InsufficientScope(ctx context.Context, wwwAuthenticate string) error {
	principal, ok := s.o.Caller(ctx)
	if !ok {
		return nil
	}
	ch := ParseChallenge(wwwAuthenticate)
	s.mu.Lock()
	if s.stepUp == nil {
		s.stepUp = map[string]string{}
	}
	s.stepUp[principal] = strings.Join(unionScopes(strings.Fields(s.stepUp[principal]), strings.Fields(ch.Scope)), " ")
	s.mu.Unlock()
	s.log.Info("the upstream needs more scope than the user granted; they are asked to consent again",
		"server", s.o.Server, "principal", principal, "scope", clip(ch.Scope))
	return s.needsAuthorization(principal, false)
}

func (s *Source) stepUpScope(principal string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Fields(s.stepUp[principal])
}

// unionScopes is a followed by what of b it lacks.
func unionScopes(a, b []string) []string {
	out := slices.Clone(a)
	for _, sc := range b {
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// Complete exchanges the code the authorization server issuer sent back to the callback for
// principal's tokens, and stores them. When the upstream names another authorization server now than
// when the request began, nothing is sent: the code and the verifier go only to the server that
// issued the code.
func (s *Source) Complete(ctx context.Context, principal, issuer, code, verifier string) error {
	d, err := s.discovery(ctx)
	if err != nil {
		return err
	}
	if !sameIssuer(issuer, d.Server.Issuer) { // before registration too: nothing at all goes there
		s.log.Warn("the upstream names another authorization server than the one a user's authorization began at; "+
			"the code is not sent there and the user is asked to start again",
			"server", s.o.Server, "principal", principal, "began_at", clip(issuer), "now_named", clip(d.Server.Issuer))
		return fmt.Errorf("upstream %q: the authorization began at another authorization server than the upstream names now", s.o.Server)
	}
	r, err := s.registration(ctx, d)
	if err != nil {
		return fmt.Errorf("upstream %q: %w", s.o.Server, err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	start := s.now()
	t, err := s.oauthConfig(d, r).Exchange(s.clientContext(ctx), code, oauth2.VerifierOption(verifier),
		oauth2.SetAuthURLParam("resource", d.Resource))
	if err != nil {
		return fmt.Errorf("upstream %q: the code exchange at %s: %w", s.o.Server, hostOf(d.Server.TokenEndpoint), tokenError(err))
	}
	if typ := t.Type(); typ != "Bearer" {
		return fmt.Errorf("upstream %q: token_type %q is not supported (only Bearer)", s.o.Server, clip(typ))
	}
	rec := s.record(t, start, d, r)
	if err := s.store(ctx, principal, rec, "user"); err != nil {
		return err
	}
	u := s.user(principal)
	u.mu.Lock()
	u.tok, u.rejected = rec, ""
	u.mu.Unlock()
	s.log.Info("a user connected the upstream", "server", s.o.Server, "principal", principal)
	s.connected(principal)
	if s.o.OnConnect != nil {
		s.o.OnConnect(principal)
	}
	return nil
}

// Server is the upstream's name.
func (s *Source) Server() string { return s.o.Server }
