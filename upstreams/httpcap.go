package upstreams

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cappedTransport wraps every upstream HTTP response body in a capReader:
// an event stream is capped per event, any other body as one message. It
// also tells the connection when a GET event stream (Streamable HTTP's
// listening stream, or legacy SSE's only stream) ends: the upstream may be
// gone.
//
// With creds (an upstream whose auth block is not static) every request
// first gets its Authorization from them, or is not sent at all.
type cappedTransport struct {
	base        http.RoundTripper
	max         int
	onOversize  func(id []byte)
	onStreamEnd func()      // may be nil
	creds       Credentials // may be nil: the configured headers only
	// life ends with the connection: an answer sent without its caller's
	// cancellation still ends then. nil: never.
	life context.Context
}

// RoundTrip sends an answer to the upstream's own request (a JSON-RPC
// response) on a context of its own. mcp-go cancels an answer's context
// when the stream that carried the request ends, which may be while the
// upstream's body-less 202 is on its way: net/http has by then put the
// connection back in its pool, and the cancellation closes it under
// whichever request took it next, which fails with context canceled on a
// live context (a call that was sent, to all appearances the upstream's
// fault). The answer is bounded by answerTimeout instead; the call it
// serves waits for the upstream anyway.
func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isAnswer(req) {
		return t.roundTrip(req)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), answerTimeout)
	release := cancel
	if t.life != nil {
		stop := context.AfterFunc(t.life, cancel) // Close ends it, as mcp-go's own cancellation did
		release = func() { stop(); cancel() }
	}
	resp, err := t.roundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// answerTimeout bounds an answer to the upstream's request, sent without
// its caller's cancellation: an upstream acknowledges one at once (202).
// It covers reading the reply's body too; the call the answer serves ends
// at its own deadline whatever this is.
const answerTimeout = 10 * time.Second

// releasingBody ends an answer's context when its body is closed: not
// before, since a body is read on that context.
type releasingBody struct {
	io.ReadCloser
	release context.CancelFunc
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func (t *cappedTransport) roundTrip(req *http.Request) (*http.Response, error) {
	var authorization string
	if t.creds != nil {
		var err error
		if req, authorization, err = authorize(req, t.creds); err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if authorization != "" && resp.StatusCode == http.StatusUnauthorized {
		if resp, err = t.reauthorize(req, resp, authorization); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode == http.StatusForbidden && t.creds != nil {
		if err := insufficientScope(req, resp, t.creds); err != nil {
			return nil, err
		}
	}
	if limited := rateLimited(req, resp); limited != nil {
		// Read a little so the connection can be reused, then refuse: the
		// error reaches the connection through mcp-go's wrapping (%w), which
		// would otherwise turn the status into text and drop Retry-After.
		_, _ = io.CopyN(io.Discard, resp.Body, 4096)
		_ = resp.Body.Close()
		return nil, limited
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	framing := frameWhole
	if mediaType == "text/event-stream" {
		framing = frameEvent
	}
	body := &cappedBody{Reader: newCapReader(resp.Body, t.max, framing, t.onOversize), closer: resp.Body}
	if framing == frameEvent && req.Method == http.MethodGet && t.onStreamEnd != nil {
		body.onEnd = t.onStreamEnd
	}
	resp.Body = body
	resp.ContentLength = -1 // a replaced body has a different length
	return resp, nil
}

// reauthorize handles a 401 to a request that carried authorization: a
// credential the upstream no longer takes (revoked, expired early, rotated
// keys) is dropped, and the request is sent once more when the credentials
// give a different one (a refresh) and the body can be sent again. A 401
// means the request was not processed, so sending it again cannot run
// anything twice. When no other credential can be had, the request fails
// as not sent with the credentials' reason; when the other one is refused
// too, or there is none, Credentials that hold each caller's own (a
// CallerRejecter) answer for the caller (authorization_required).
func (t *cappedTransport) reauthorize(req *http.Request, resp *http.Response, authorization string) (*http.Response, error) {
	t.creds.Rejected(req.Context(), authorization)
	if req.Body == nil || req.GetBody != nil {
		again, value, err := authorize(req, t.creds)
		if err != nil {
			drain(resp)
			return nil, err
		}
		if value != "" && value != authorization {
			if req.GetBody != nil {
				if again.Body, err = req.GetBody(); err != nil {
					return resp, nil
				}
			}
			drain(resp)
			if resp, err = t.base.RoundTrip(again); err != nil || resp.StatusCode != http.StatusUnauthorized {
				return resp, err
			}
			t.creds.Rejected(again.Context(), value)
		}
	}
	if r, ok := t.creds.(CallerRejecter); ok {
		if err := r.RejectedError(req.Context()); err != nil {
			drain(resp)
			return nil, &CallError{Where: NotSent, Err: &CredentialError{Err: err}}
		}
	}
	return resp, nil
}

// ScopeChallenger is implemented by Credentials that can ask the caller
// for more scope (auth mode oauth): InsufficientScope is what a request
// the upstream refused with 403 insufficient_scope answers instead of the
// response, given the refusal's WWW-Authenticate; nil lets the response
// through.
type ScopeChallenger interface {
	InsufficientScope(ctx context.Context, wwwAuthenticate string) error
}

// insufficientScope is the NotSent error of a 403 whose challenge says
// insufficient_scope, when the credentials can ask the caller for more
// (a 403 means the request was not processed); nil otherwise.
func insufficientScope(req *http.Request, resp *http.Response, creds Credentials) error {
	sc, ok := creds.(ScopeChallenger)
	challenge := resp.Header.Get("WWW-Authenticate")
	if !ok || !strings.Contains(challenge, "insufficient_scope") {
		return nil
	}
	err := sc.InsufficientScope(req.Context(), challenge)
	if err == nil {
		return nil
	}
	drain(resp)
	return &CallError{Where: NotSent, Err: &CredentialError{Err: err}}
}

// drain reads a little of a response that is not used, so its connection
// can be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4096)
	_ = resp.Body.Close()
}

type cappedBody struct {
	io.Reader
	closer io.Closer
	onEnd  func()
	ended  sync.Once
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *cappedBody) Close() error {
	b.end()
	return b.closer.Close()
}

func (b *cappedBody) end() {
	if b.onEnd != nil {
		b.ended.Do(b.onEnd)
	}
}

// rateLimited is the error for a request the upstream refused for its rate
// limit or load, unprocessed: HTTP 429, or 503 with a Retry-After. Only a
// POST (a request or notification) is one; nil for anything else.
func rateLimited(req *http.Request, resp *http.Response) *RateLimitedError {
	if req.Method != http.MethodPost {
		return nil
	}
	after, named := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode == http.StatusServiceUnavailable && named:
	default:
		return nil
	}
	return &RateLimitedError{Status: resp.StatusCode, After: after}
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date. A
// date in the past is no wait; named is false when v is absent or invalid.
func retryAfter(v string, now time.Time) (after time.Duration, named bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, maxRetryAfter)) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), maxRetryAfter*time.Second), true
	}
	return 0, false
}

// maxRetryAfter bounds a parsed Retry-After (seconds): a day is longer than
// any call's deadline, so the call is not repeated either way.
const maxRetryAfter = 24 * 60 * 60

// Credentials give each request to an HTTP upstream its Authorization
// header, per request: the gateway's own token (client_credentials) or one
// for the caller whose request it is (token_exchange). The caller is known
// from the request's context, which is the call's. Package
// upstreams/credentials implements it; the gateway sets Server.Credentials
// for an upstream whose auth block is not static.
type Credentials interface {
	// Authorization is the header value for a request made in ctx (in the
	// header HeaderNamer names, Authorization otherwise); "" sends the
	// request without it. An error means the request must not be sent.
	Authorization(ctx context.Context) (string, error)
	// Rejected says the upstream answered 401 to a request that carried
	// authorization, so a cached token with that value is dropped.
	Rejected(ctx context.Context, authorization string)
}

// CredentialError is a request that was never sent because it could not
// be given a credential: the authorization server refused or could not be
// reached, or (CallerRefused) the caller cannot be served by this
// upstream at all, having no JWT to exchange. It arrives wrapped in a
// NotSent CallError. Its message names no token or secret.
type CredentialError struct {
	Err error
}

func (e *CredentialError) Error() string { return e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// CallerRefused reports whether repeating the call cannot help: the
// caller has no credential this upstream can use (the error says so with
// a CallerRefused method returning true).
func (e *CredentialError) CallerRefused() bool {
	var r interface{ CallerRefused() bool }
	return errors.As(e.Err, &r) && r.CallerRefused()
}

// AuthorizationRequired reports whether err is a call that was not sent
// because its caller holds no credential of their own for the upstream yet
// (auth modes oauth and per_user), and the message that tells the caller
// where to supply one. The credential error says so with an
// AuthorizationRequired method returning that message, which names no
// secret. The call answers authorization_required.
func AuthorizationRequired(err error) (message string, ok bool) {
	var ce *CredentialError
	if !errors.As(err, &ce) {
		return "", false
	}
	var r interface{ AuthorizationRequired() string }
	if !errors.As(ce.Err, &r) {
		return "", false
	}
	return r.AuthorizationRequired(), true
}

// IsCredentialError reports whether err is a call that was not sent for
// want of a credential, and whether the caller was refused outright.
func IsCredentialError(err error) (isCredential, callerRefused bool) {
	var ce *CredentialError
	if !errors.As(err, &ce) {
		return false, false
	}
	return true, ce.CallerRefused()
}

// CallerRejecter is implemented by Credentials that hold a credential per
// caller which only the caller can replace (auth modes oauth and per_user).
// RejectedError is what a request whose credential the upstream refused
// (HTTP 401) answers instead of the response: an error the upstream
// never processed the request for (it is not its failure, and must not
// count against its circuit breaker), typically one AuthorizationRequired
// finds; nil lets the response through.
type CallerRejecter interface {
	RejectedError(ctx context.Context) error
}

// HeaderNamer is implemented by Credentials whose value goes in a header
// other than Authorization (auth mode per_user's header, such as
// X-API-Key).
type HeaderNamer interface {
	HeaderName() string
}

// authorize is req with the Authorization creds give it, on a copy (a
// RoundTripper must not change the request it is given), or the NotSent
// error that stops it. An empty value (a request no caller made, to an
// upstream with no credential of the gateway's own) leaves the request as
// it is.
func authorize(req *http.Request, creds Credentials) (*http.Request, string, error) {
	v, err := creds.Authorization(req.Context())
	if err != nil {
		return nil, "", &CallError{Where: NotSent, Err: &CredentialError{Err: err}}
	}
	if v == "" {
		return req, "", nil
	}
	name := "Authorization"
	if n, ok := creds.(HeaderNamer); ok {
		name = n.HeaderName()
	}
	req = req.Clone(req.Context())
	req.Header.Set(name, v)
	return req, v, nil
}
