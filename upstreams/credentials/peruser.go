package credentials

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// The defaults of a per_user upstream: the secret goes in Authorization as a bearer token.
const (
	DefaultPerUserHeader = "Authorization"
	DefaultPerUserFormat = "Bearer " + SecretPlaceholder
)

// SecretPlaceholder is where the secret goes in PerUserOptions.Format.
const SecretPlaceholder = "{secret}"

// PerUserOptions configure one per_user upstream's source.
type PerUserOptions struct {
	Server string      // the upstream's name (mcpServers.<name>), the vault key's Upstream
	Vault  vault.Store // where each user's secret is (Kind Secret); nil holds none
	// Header is the request header the secret goes in; DefaultPerUserHeader when "".
	Header string
	// Format is the header's value with SecretPlaceholder where the secret goes; DefaultPerUserFormat
	// when "".
	Format string
	// ServiceSecret is what the requests no caller made (initialize, listing, the listening stream)
	// carry, formatted like a user's; "" sends them without the header.
	ServiceSecret string
	// Caller returns who made the request whose context ctx is; ok is false for the gateway's own
	// requests. Required.
	Caller func(ctx context.Context) (c Caller, ok bool)
	// ConnectURL is the gateway page where principal supplies their secret for upstream; nil (or "")
	// when there is none, and the message asks for an operator.
	ConnectURL func(principal, upstream string) string
	Now        func() time.Time // time.Now when nil
	Log        *slog.Logger     // nil discards
}

// PerUserSource gives each request to a per_user upstream the calling user's own secret, read from the
// vault on every request: a secret set or revoked takes effect at the next call, on every replica
// that shares the vault. A caller with none stored is answered with an *AuthorizationRequiredError,
// and the request is not sent. It is safe for concurrent use.
type PerUserSource struct {
	o   PerUserOptions
	now func() time.Time
	log *slog.Logger
}

// NewPerUser checks o and returns the upstream's source.
func NewPerUser(o PerUserOptions) (*PerUserSource, error) {
	if o.Caller == nil {
		return nil, fmt.Errorf("credentials: upstream %q: per_user needs PerUserOptions.Caller", o.Server)
	}
	o.Header = cmp.Or(o.Header, DefaultPerUserHeader)
	o.Format = cmp.Or(o.Format, DefaultPerUserFormat)
	if strings.Count(o.Format, SecretPlaceholder) != 1 {
		return nil, fmt.Errorf("credentials: upstream %q: the format must hold %s once", o.Server, SecretPlaceholder)
	}
	s := &PerUserSource{o: o, now: o.Now, log: o.Log}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// HeaderName is the header the value goes in (upstreams.HeaderNamer).
func (s *PerUserSource) HeaderName() string { return s.o.Header }

// Authorization is the header value for a request made in ctx: the caller's secret, formatted; the
// service secret (or "", no header) for a request no caller made.
func (s *PerUserSource) Authorization(ctx context.Context) (string, error) {
	c, ok := s.o.Caller(ctx)
	if !ok {
		if s.o.ServiceSecret == "" {
			return "", nil
		}
		return s.format(s.o.ServiceSecret), nil
	}
	if s.o.Vault == nil {
		return "", s.required(c.Principal, false)
	}
	data, e, err := s.o.Vault.Get(ctx, vault.Key{Principal: c.Principal, Upstream: s.o.Server, Kind: vault.Secret})
	switch {
	case errors.Is(err, vault.ErrNotFound):
		return "", s.required(c.Principal, false)
	case err != nil:
		return "", &Error{Server: s.o.Server, Err: fmt.Errorf("the credential store: %w", err)}
	case !e.Expires.IsZero() && !s.now().Before(e.Expires):
		return "", s.required(c.Principal, false)
	}
	if vault.CheckSecret(data) != nil { // stored by something that skipped the check: never a header
		return "", &Error{Server: s.o.Server, Err: errors.New("the stored secret is not usable in a header")}
	}
	return s.format(string(data)), nil
}

// Rejected is the upstream's 401 to a request that carried value: the stored secret stays (the user or
// an operator replaces it), and the refusal is logged without it.
func (s *PerUserSource) Rejected(ctx context.Context, _ string) {
	attrs := []any{"server", s.o.Server}
	if c, ok := s.o.Caller(ctx); ok {
		attrs = append(attrs, "principal", c.Principal)
	} else {
		attrs = append(attrs, "service_secret", true)
	}
	s.log.Warn("the upstream refused the secret it was sent (HTTP 401)", attrs...)
}

// RejectedError is what a request whose secret the upstream refused (401) answers: for a caller's
// secret, authorization_required, asking for a new one, rather than an upstream failure (which would
// count against the upstream's circuit breaker, shared by every user, for one user's stale secret);
// nil for the gateway's own request (upstreams.CallerRejecter).
func (s *PerUserSource) RejectedError(ctx context.Context) error {
	c, ok := s.o.Caller(ctx)
	if !ok {
		return nil
	}
	return s.required(c.Principal, true)
}

func (s *PerUserSource) required(principal string, rejected bool) error {
	e := &AuthorizationRequiredError{Server: s.o.Server, Mode: PerUser, Rejected: rejected}
	if s.o.ConnectURL != nil {
		e.ConnectURL = s.o.ConnectURL(principal, s.o.Server)
	}
	return e
}

func (s *PerUserSource) format(secret string) string {
	return strings.Replace(s.o.Format, SecretPlaceholder, secret, 1)
}
