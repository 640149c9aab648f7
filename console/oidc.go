package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC sign-in: an approver signs in at the organisation's OpenID Provider with the authorization
// code flow and PKCE (S256), and the console starts the same session a key sign-in does, under the
// name the configured claim gives, provided that name is a configured approver.
//
// Why github.com/coreos/go-oidc/v3 with golang.org/x/oauth2: the console is a relying party and
// needs three things, discovery, ID token verification (signature against the provider's rotating
// keys, issuer, audience, expiry) and the code exchange with PKCE. go-oidc does the first two and
// nothing else (Kubernetes and Dex rely on it; its only dependency of note is go-jose, already in
// the module), and x/oauth2, already a dependency, does the exchange and PKCE (GenerateVerifier,
// S256ChallengeOption). zitadel/oidc, which the tests use for a real provider, also has a relying
// party, but it brings its own cookie handling for state and a larger API than the console needs.
//
// A flow's state, nonce and PKCE verifier travel in the browser's flow cookie, not in the gateway's
// memory: /ui/oidc/start needs no session, so flows kept server-side would be anyone's to fill (a
// bound on them locked every approver out while someone kept starting flows), and the provider's
// answer may reach another replica than the one the sign-in started on. The cookie is the browser's
// own (HttpOnly, Path=/ui/): another site can neither read nor set it, which is what binds the
// answer to the browser that asked; the code the answer carries is one use at the provider, and
// useless without the verifier in that cookie.

// OIDC configures sign-in with an OpenID Provider (console.oidc).
type OIDC struct {
	Issuer         string
	ClientID       string
	ClientSecret   string // "" for a public client: PKCE alone
	RedirectURL    string // https://<console>/ui/oidc/callback, registered at the provider
	PrincipalClaim string // the claim naming the approver; "" is sub
	// HTTPClient talks to the provider; nil: a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Limits of the flows in progress.
const (
	// oidcFlowTTL is how long a sign-in may stay at the provider before its state is forgotten.
	oidcFlowTTL = 10 * time.Minute
	// oidcCookie carries a flow (state, nonce, verifier, expiry) from the start to the callback. It
	// is SameSite=Lax, not Strict: the callback is a navigation from the provider's site, on which a
	// Strict cookie is not sent. It opens nothing by itself: the provider's answer must match it.
	oidcCookie = "tg_console_oidc"
	// maxOIDCCookie bounds the flow cookie read back: three 43-character tokens and a time.
	maxOIDCCookie = 256
)

// oidcFlow is one sign-in waiting for the provider's answer.
type oidcFlow struct {
	state, nonce, verifier string
	expires                time.Time
}

// oidcSignIn is the console's relying party.
type oidcSignIn struct {
	o   OIDC
	now func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider // discovered on first use, and again after a failure
}

func newOIDCSignIn(o OIDC, now func() time.Time) *oidcSignIn {
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = "sub"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &oidcSignIn{o: o, now: now}
}

// discover returns the provider, reading its discovery document the first time (and after a
// failure, so that a provider down when the gateway started is found once it is back).
func (s *oidcSignIn) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	p := s.provider
	s.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.o.HTTPClient), s.o.Issuer)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.provider = p
	s.mu.Unlock()
	return p, nil
}

func (s *oidcSignIn) config(p *oidc.Provider) *oauth2.Config {
	scopes := []string{oidc.ScopeOpenID}
	switch s.o.PrincipalClaim {
	case "email":
		scopes = append(scopes, "email")
	case "preferred_username", "name":
		scopes = append(scopes, "profile")
	}
	return &oauth2.Config{ClientID: s.o.ClientID, ClientSecret: s.o.ClientSecret, RedirectURL: s.o.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: scopes}
}

// begin is a new flow.
func (s *oidcSignIn) begin() oidcFlow {
	return oidcFlow{state: randomToken(), nonce: randomToken(), verifier: oauth2.GenerateVerifier(), expires: s.now().Add(oidcFlowTTL)}
}

// cookie is f as the flow cookie's value: its fields joined by dots (none holds one: they are
// base64url and a decimal time).
func (f oidcFlow) cookie() string {
	return f.state + "." + f.nonce + "." + f.verifier + "." + strconv.FormatInt(f.expires.Unix(), 10)
}

// flowFrom reads the flow cookie's value: ok is false when it is not one, or the flow is over.
func (s *oidcSignIn) flowFrom(v string) (oidcFlow, bool) {
	parts := strings.Split(v, ".")
	if len(v) > maxOIDCCookie || len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return oidcFlow{}, false
	}
	sec, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return oidcFlow{}, false
	}
	f := oidcFlow{state: parts[0], nonce: parts[1], verifier: parts[2], expires: time.Unix(sec, 0)}
	return f, s.now().Before(f.expires)
}

// oidcStart sends the browser to the provider with a fresh state, nonce and PKCE challenge.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	p, err := c.oidc.discover(r.Context())
	if err != nil {
		c.o.Log.Error("console: the OpenID Provider cannot be reached", "issuer", c.oidc.o.Issuer, "err", err)
		c.signinForm(w, r, http.StatusBadGateway, "The sign-in provider cannot be reached right now; try again, or sign in with your key.")
		return
	}
	f := c.oidc.begin()
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: f.cookie(), Path: Prefix, MaxAge: int(oidcFlowTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)})
	to := c.oidc.config(p).AuthCodeURL(f.state, oidc.Nonce(f.nonce), oauth2.S256ChallengeOption(f.verifier))
	http.Redirect(w, r, to, http.StatusFound)
}

// oidcCallback takes the provider's answer: the state must match the flow this browser started,
// the code is exchanged with the flow's PKCE verifier, the ID token verified (signature, issuer,
// audience, expiry, nonce), and the name read from the configured claim must be an approver.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(oidcCookie)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)})
	if err != nil || ck.Value == "" {
		c.signinForm(w, r, http.StatusBadRequest, "This sign-in was not started in this browser (or it took too long); start again.")
		return
	}
	f, ok := c.oidc.flowFrom(ck.Value)
	q := r.URL.Query()
	if !ok || !tokenEqual(q.Get("state"), f.state) {
		c.o.Log.Warn("console: OIDC callback with an unknown or expired state refused", "remote", r.RemoteAddr)
		c.signinForm(w, r, http.StatusBadRequest, "This sign-in was not started in this browser (or it took too long); start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		c.o.Log.Warn("console: the OpenID Provider refused the sign-in", "error", e, "description", q.Get("error_description"))
		c.signinForm(w, r, http.StatusUnauthorized, "The sign-in provider did not sign you in ("+e+").")
		return
	}
	name, err := c.oidc.identify(r.Context(), q.Get("code"), f)
	if err != nil {
		c.o.Log.Warn("console: OIDC sign-in failed", "err", err, "remote", r.RemoteAddr)
		c.signinForm(w, r, http.StatusUnauthorized, "The sign-in provider's answer could not be verified; you are not signed in.")
		return
	}
	if !c.isApprover(name) {
		c.o.Log.Warn("console: OIDC sign-in of someone who is not an approver", "name", name, "claim", c.oidc.o.PrincipalClaim, "remote", r.RemoteAddr)
		c.signinForm(w, r, http.StatusForbidden, "You signed in at the provider as "+name+", who is not a console approver.")
		return
	}
	if err := c.begin(w, r, name, "oidc", ""); err != nil {
		c.o.Log.Error("console: session not created", "approver", name, "err", err)
		c.signinForm(w, r, http.StatusServiceUnavailable, "You could not be signed in right now; try again.")
		return
	}
	// Not a redirect: the browser came here from the provider's site, and on a redirect from such a
	// navigation it would not send the SameSite=Strict session cookie just set. A page of the
	// console's own that moves on is a same-site navigation.
	c.render(w, r, http.StatusOK, "signedin", c.base(r, &Session{Approver: name}, "Signed in", ""))
}

// identify exchanges the code and returns the name the ID token (or, when the claim is not in it,
// the UserInfo answer for the same subject) gives in the principal claim.
func (s *oidcSignIn) identify(ctx context.Context, code string, f oidcFlow) (string, error) {
	if code == "" {
		return "", errors.New("no code in the answer")
	}
	ctx = oidc.ClientContext(ctx, s.o.HTTPClient)
	p, err := s.discover(ctx)
	if err != nil {
		return "", err
	}
	cfg := s.config(p)
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		return "", fmt.Errorf("code exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("no id_token in the token response")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.o.ClientID, Now: s.now}).Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("ID token: %w", err)
	}
	if !tokenEqual(idt.Nonce, f.nonce) {
		return "", errors.New("ID token: the nonce is not this sign-in's")
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return "", err
	}
	if _, ok := claims[s.o.PrincipalClaim]; !ok && p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(ctx, cfg.TokenSource(ctx, tok))
		if err != nil {
			return "", fmt.Errorf("userinfo: %w", err)
		}
		if ui.Subject != idt.Subject {
			return "", errors.New("userinfo: its subject is not the ID token's")
		}
		claims = map[string]any{}
		if err := ui.Claims(&claims); err != nil {
			return "", err
		}
	}
	return principalFrom(claims, s.o.PrincipalClaim)
}

// principalFrom reads the approver's name from claim. An email that the provider says is not
// verified names nobody: anyone can type an address into an account. Said is any email_verified
// other than true: some providers send the string "true" or "false" (Amazon Cognito's UserInfo),
// and a value that is not plainly true must not read as verified.
func principalFrom(claims map[string]any, claim string) (string, error) {
	name, _ := claims[claim].(string)
	if name == "" {
		return "", fmt.Errorf("the claim %q is missing or not a string", claim)
	}
	if claim == "email" {
		if v, said := claims["email_verified"]; said && !isTrue(v) {
			return "", errors.New("the email is not verified")
		}
	}
	return name, nil
}

// isTrue: the boolean true, or the string "true" in any case.
func isTrue(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}

// isApprover reports whether name is a configured approver's.
func (c *Console) isApprover(name string) bool { return c.approvers.Load().has(name) }

// ssoLabel is what the sign-in page calls the provider: its host.
func (s *oidcSignIn) ssoLabel() string {
	if u, err := url.Parse(s.o.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return s.o.Issuer
}
