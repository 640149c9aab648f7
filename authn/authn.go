package authn

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/authz"
)

// realm names the protection space in every challenge.
const realm = "toolgate"

// Authenticator maps HTTP requests to subjects. It is safe for concurrent use; Close stops its key
// refreshing.
type Authenticator struct {
	keys      atomic.Pointer[apiKeys] // by hash; ReplaceAPIKeys swaps the whole set
	anonymous string                  // Options.AllowAnonymous
	jwt       *jwtVerifier            // nil unless Options.JWT
	meta      *metadata               // nil unless Options.Resource

	// The three WWW-Authenticate values, built once.
	missing, invalid, badRequest string
}

// Option changes how New builds an Authenticator. Only this package's tests make them (a fixed clock, no
// rate limit on unknown-kid refreshes): the defaults suit production.
type Option func(*settings)

type settings struct {
	now func() time.Time
	// kidRefreshEvery is the least time between refreshes caused by unknown kids; tests lower it.
	kidRefreshEvery time.Duration
}

// New builds the Authenticator for o: API keys (with their attributes), the anonymous principal, the
// protected-resource metadata when o.Resource is set, and, when o.JWT is set, the JWT verifier and its key
// set. A zero field of o means its default (see [Options]). A jwks_file that cannot be read or parsed is an
// error naming the file. A jwks_url is fetched before New returns, bounded to 10s; if that fails New still
// succeeds and logs it, and tokens fail until a later fetch works. ctx bounds that first fetch and, if
// cancelled, also stops refreshing; Close is the usual way to stop. A nil log discards.
func New(ctx context.Context, o Options, log *slog.Logger, opts ...Option) (*Authenticator, error) {
	s := settings{now: time.Now, kidRefreshEvery: unknownKIDEvery}
	for _, opt := range opts {
		opt(&s)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Authenticator{anonymous: o.AllowAnonymous}
	keys := newAPIKeys(o.APIKeys)
	a.keys.Store(&keys)

	if o.Resource != "" {
		var issuer string
		if o.JWT != nil {
			issuer = o.JWT.Issuer
		}
		m, err := newMetadata(o.Resource, issuer)
		if err != nil {
			return nil, err
		}
		a.meta = m
	}
	if o.JWT != nil {
		if o.Resource == "" {
			return nil, errors.New("authn: auth.jwt needs auth.resource, this gateway's resource URI")
		}
		v, err := newJWTVerifier(ctx, o.JWT, o.Resource, log, s)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	}
	a.buildChallenges()
	if a.anonymous != "" {
		log.Warn("HTTP requests without a credential are accepted", "principal", a.anonymous)
	}
	return a, nil
}

// Close stops refreshing the JWT key set. It is safe to call more than once, and on an Authenticator
// without JWT.
func (a *Authenticator) Close() {
	if a.jwt != nil {
		a.jwt.close()
	}
}

// Failure is why a request was not authenticated, or (status 403, [Authenticator.InsufficientScope])
// why its token does not reach far enough. Send it with Respond: the client gets Status,
// WWW-Authenticate: Challenge and a generic body. Reason is for the log only.
type Failure struct {
	Status    int    // 401; 400 for a malformed request (a token in the query string, two Authorization headers); 403 for a missing scope
	Challenge string // the whole WWW-Authenticate value
	Reason    string // what exactly failed (expired, wrong audience, unknown kid, ...): log it, never send it
}

func (f *Failure) Error() string { return "not authenticated: " + f.Reason }

// Respond writes the failure as an HTTP response. The body is a fixed phrase per status; Reason is not
// in it.
func (f *Failure) Respond(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", f.Challenge)
	msg := "unauthorized: send Authorization: Bearer <API key or access token>"
	switch f.Status {
	case http.StatusBadRequest:
		msg = "bad request: send the credential in one Authorization header, never in the URL"
	case http.StatusForbidden:
		msg = "forbidden: the access token lacks a scope this request needs; obtain a token with the scopes WWW-Authenticate names and repeat the request"
	}
	http.Error(w, msg, f.Status)
}

// Authenticate returns the subject the request acts as, or a *Failure. It reads only the URL and the
// Authorization header, never the body.
func (a *Authenticator) Authenticate(r *http.Request) (authz.Subject, error) {
	if r.URL != nil && r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
		return authz.Subject{}, fail(http.StatusBadRequest, a.badRequest,
			"access_token in the query string (refused even beside a header: URLs are logged)")
	}
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0 && a.anonymous != "":
		return authz.Subject{Principal: a.anonymous}, nil
	case len(values) == 0:
		return authz.Subject{}, fail(http.StatusUnauthorized, a.missing, "no credential")
	case len(values) > 1:
		return authz.Subject{}, fail(http.StatusBadRequest, a.badRequest, "more than one Authorization header")
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimLeft(token, " ")
	switch {
	case !strings.EqualFold(scheme, "Bearer"):
		// RFC 6750 §3.1: an unsupported scheme gets the challenge without an error code. The header
		// itself is not logged: it may be a credential.
		return authz.Subject{}, fail(http.StatusUnauthorized, a.missing, "the Authorization header does not use the Bearer scheme")
	case !b64token(token):
		return authz.Subject{}, fail(http.StatusUnauthorized, a.invalid, "the bearer token is empty or not RFC 6750 token characters")
	case a.jwt != nil && looksLikeJWT(token):
		sub, reason := a.jwt.subject(r.Context(), token)
		if reason != "" {
			return authz.Subject{}, fail(http.StatusUnauthorized, a.invalid, reason)
		}
		// Kept for token_exchange upstreams only, which trade it for a token of their own; it is
		// never sent upstream itself and prints redacted (authz.Secret).
		sub.Bearer = authz.Secret(token)
		return sub, nil
	}
	key, ok := a.keys.Load().lookup(token) // one load: the request sees one set, whatever a reload does
	if !ok {
		reason := "unknown API key"
		if looksLikeJWT(token) {
			reason += " (the token looks like a JWT, but auth.jwt is not configured)"
		}
		return authz.Subject{}, fail(http.StatusUnauthorized, a.invalid, reason)
	}
	sub := authz.Subject{Principal: key.principal}
	if key.attrs != nil {
		sub.Attrs = maps.Clone(key.attrs) // the caller may change its copy
	}
	return sub, nil
}

// InsufficientScope is the answer to a request whose access token lacks a scope the request needs
// (MCP authorization, "Scope Challenge Handling"; RFC 6750 section 3.1): 403 with
//
//	Bearer realm="toolgate", error="insufficient_scope", scope="<scopes>", error_description="...", resource_metadata="..."
//
// scopes are what the client should ask its authorization server for: the gateway passes the
// scopes the token already has with the ones the request lacks, so that a client which replaces its
// token's scopes by these (as the official SDKs do) keeps what it had. They are scope-tokens (no
// space, '"' or '\'), sorted by the caller.
func (a *Authenticator) InsufficientScope(scopes []string) *Failure {
	var meta string
	if a.meta != nil {
		meta = ", resource_metadata=" + quote(a.meta.url)
	}
	challenge := "Bearer realm=" + quote(realm) + `, error="insufficient_scope", scope=` + quote(strings.Join(scopes, " ")) +
		`, error_description="the access token lacks a scope this request needs"` + meta
	return fail(http.StatusForbidden, challenge, "the access token lacks a scope the request needs")
}

func fail(status int, challenge, reason string) *Failure {
	return &Failure{Status: status, Challenge: challenge, Reason: reason}
}

// b64token reports RFC 6750's b64token syntax for a bearer token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=". A loop, not
// a regular expression: it runs on every request.
func b64token(s string) bool {
	i := 0
	for i < len(s) && tokenChar(s[i]) {
		i++
	}
	if i == 0 {
		return false
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return i == len(s)
}

func tokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
}

// jwtShape is three base64url segments; the signature may be empty, so that alg "none" tokens reach the
// verifier and are refused there for what they are.
var jwtShape = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)

func looksLikeJWT(token string) bool { return jwtShape.MatchString(token) }

// quote makes an RFC 9110 quoted-string.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// buildChallenges prepares the WWW-Authenticate values. error_description is deliberately generic: the
// precise reason goes to the log.
func (a *Authenticator) buildChallenges() {
	var meta string
	if a.meta != nil {
		meta = ", resource_metadata=" + quote(a.meta.url)
	}
	base := "Bearer realm=" + quote(realm)
	a.missing = base + meta
	a.invalid = base + `, error="invalid_token", error_description="the credential is not valid here"` + meta
	a.badRequest = base + `, error="invalid_request", error_description="send the credential in one Authorization header"` + meta
}
