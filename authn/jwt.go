package authn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/authz"
)

const (
	// maxTokenBytes bounds the work spent on one presented token; real access tokens, even with many
	// group claims, stay far below it.
	maxTokenBytes = 64 << 10
	// maxRoles bounds the roles one token may bring into a request.
	maxRoles = 256
	// maxNameBytes bounds a principal or role taken from a token.
	maxNameBytes = 256
	// maxScopes bounds the scopes one token may bring into a request (counted as written,
	// duplicates included, so a claim of one scope repeated thousands of times is refused before
	// anything is sorted).
	maxScopes = 256
	// maxScopeBytes bounds one scope (authz.ScopeProblem applies the same bound).
	maxScopeBytes = 256
)

// jwtVerifier checks JWT bearer tokens against JWTOptions and maps their claims to a subject.
type jwtVerifier struct {
	parser         *jwt.Parser
	keys           keyfunc.Keyfunc
	source         *keySource
	principalClaim string
	rolesClaim     string
	attrClaims     []string
}

// newJWTVerifier builds the verifier for j; resource is Options.Resource, the default audience.
func newJWTVerifier(ctx context.Context, j *JWTOptions, resource string, log *slog.Logger, s settings) (*jwtVerifier, error) {
	if j.Issuer == "" {
		return nil, errors.New("authn: auth.jwt.issuer is required")
	}
	js := j.resolve(resource)
	// Config refuses unaccepted algorithms at load; Options built in code get the same guarantee here.
	if len(js.algorithms) == 0 {
		return nil, errors.New("authn: auth.jwt.algorithms lists no accepted algorithm")
	}
	src, err := newKeySource(ctx, j, js.refresh, s.kidRefreshEvery, log)
	if err != nil {
		return nil, err
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:     ctx,
		Storage: src.storage,
		// Keys without "use" are signing keys in practice; "enc" keys must never verify a signature.
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		src.close()
		return nil, fmt.Errorf("authn: %w", err)
	}
	v := &jwtVerifier{
		parser: jwt.NewParser(
			jwt.WithValidMethods(js.algorithms),
			jwt.WithIssuer(j.Issuer),
			jwt.WithAudience(js.audience),
			jwt.WithLeeway(js.leeway),
			jwt.WithTimeFunc(s.now),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithStrictDecoding(),
		),
		keys:           kf,
		source:         src,
		principalClaim: js.principalClaim,
		rolesClaim:     j.RolesClaim,
		attrClaims:     slices.Clone(j.AttributeClaims),
	}
	log.Info("JWT bearer tokens accepted", "issuer", j.Issuer, "audience", js.audience,
		"keys", src.name, "algorithms", strings.Join(js.algorithms, ","))
	return v, nil
}

func (v *jwtVerifier) close() { v.source.close() }

// subject verifies raw and maps its claims. reason is "" on success, else what failed, for the log.
func (v *jwtVerifier) subject(ctx context.Context, raw string) (sub authz.Subject, reason string) {
	if len(raw) > maxTokenBytes {
		return authz.Subject{}, fmt.Sprintf("jwt: token of %d bytes, over the %d byte limit", len(raw), maxTokenBytes)
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(raw, claims, v.keyfunc(ctx)); err != nil {
		return authz.Subject{}, "jwt: " + err.Error()
	}
	principal, err := v.principal(claims)
	if err != nil {
		return authz.Subject{}, "jwt: " + err.Error()
	}
	roles, err := v.roles(claims)
	if err != nil {
		return authz.Subject{}, "jwt: " + err.Error()
	}
	scopes, err := TokenScopes(claims)
	if err != nil {
		return authz.Subject{}, "jwt: " + err.Error()
	}
	return authz.Subject{Principal: principal, Roles: roles, Attrs: v.attrs(claims), Scoped: true, Scopes: scopes}, ""
}

// keyfunc refuses "crit" before looking a key up: golang-jwt does not implement any critical header
// extension, and RFC 7515 §4.1.11 says a token naming one it does not understand must be rejected.
func (v *jwtVerifier) keyfunc(ctx context.Context) jwt.Keyfunc {
	lookup := v.keys.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errors.New(`the "crit" header names extensions toolgate does not implement`)
		}
		return lookup(t)
	}
}

func (v *jwtVerifier) principal(claims jwt.MapClaims) (string, error) {
	val, ok := claimValue(claims, v.principalClaim)
	if !ok {
		return "", fmt.Errorf("the principal claim %q is missing", v.principalClaim)
	}
	s, ok := val.(string)
	if !ok {
		return "", fmt.Errorf("the principal claim %q is not a string", v.principalClaim)
	}
	if problem := nameProblem(s); problem != "" {
		return "", fmt.Errorf("the principal claim %q %s", v.principalClaim, problem)
	}
	return s, nil
}

// roles reads the roles claim: a list of strings, or one string of space-separated roles. A missing claim
// means no roles. Any value that could not be a policy subject refuses the token.
func (v *jwtVerifier) roles(claims jwt.MapClaims) ([]string, error) {
	if v.rolesClaim == "" {
		return nil, nil
	}
	val, ok := claimValue(claims, v.rolesClaim)
	if !ok || val == nil {
		return nil, nil
	}
	var roles []string
	switch x := val.(type) {
	case string:
		roles = strings.Fields(x)
	case []any:
		for _, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("the roles claim %q holds a value that is not a string", v.rolesClaim)
			}
			roles = append(roles, s)
		}
	default:
		return nil, fmt.Errorf("the roles claim %q is neither a list of strings nor a string", v.rolesClaim)
	}
	if len(roles) > maxRoles {
		return nil, fmt.Errorf("the roles claim %q holds %d roles, over the limit of %d", v.rolesClaim, len(roles), maxRoles)
	}
	for _, r := range roles {
		if problem := nameProblem(r); problem != "" {
			return nil, fmt.Errorf("a role in claim %q %s", v.rolesClaim, problem)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles), nil
}

// attrs copies the configured claims that hold strings; other values are skipped.
func (v *jwtVerifier) attrs(claims jwt.MapClaims) map[string]string {
	var out map[string]string
	for _, name := range v.attrClaims {
		if s, ok := claims[name].(string); ok {
			if out == nil {
				out = make(map[string]string, len(v.attrClaims))
			}
			out[name] = s
		}
	}
	return out
}

// claimValue looks name up as a claim first, then, if it has dots, as a path into nested objects.
func claimValue(claims jwt.MapClaims, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = map[string]any(claims)
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// nameProblem applies config's rule for principals to a name from a token: usable as a Casbin subject.
// It returns "" for a good name, else what is wrong (without echoing the value, which is the caller's).
func nameProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > maxNameBytes:
		return fmt.Sprintf("is longer than %d bytes", maxNameBytes)
	case strings.TrimSpace(s) != s:
		return "has leading or trailing spaces"
	case strings.ContainsAny(s, "$,"):
		return `contains "$" or ","`
	case strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "contains control characters"
	}
	return ""
}

// TokenScopes reads the scopes of a token's claims: the scope claim, one string of space-separated
// scopes (RFC 9068 section 2.2.3, RFC 8693 section 4.2), or, only when there is no scope claim, scp,
// either such a string or a list of strings (as Microsoft Entra ID and Okta issue it). No claim
// means no scopes (nil). They come back sorted, without duplicates. A claim of another type, a
// list item that is not a string, a scope that is not an RFC 6749 scope-token (a space inside a
// list item, '"', '\', control characters; over 256 bytes) and more than 256 scopes refuse the
// token: such a claim is malformed, and guessing what it grants is not this gateway's call.
// `toolgate policy test` maps a case's claims with it too.
func TokenScopes(claims map[string]any) ([]string, error) {
	name := "scope"
	val, ok := claims[name]
	if !ok {
		name = "scp"
		if val, ok = claims[name]; !ok {
			return nil, nil
		}
	}
	var scopes []string
	switch x := val.(type) {
	case string:
		if len(x) > maxScopes*(maxScopeBytes+1) {
			return nil, fmt.Errorf("the %s claim is %d bytes long, over the limit of %d scopes", name, len(x), maxScopes)
		}
		scopes = strings.FieldsFunc(x, func(r rune) bool { return r == ' ' })
	case []any:
		if name == "scope" {
			return nil, errors.New(`the scope claim is a list; it must be one string of space-separated scopes (a list is accepted in "scp")`)
		}
		if len(x) > maxScopes {
			return nil, fmt.Errorf("the scp claim holds %d scopes, over the limit of %d", len(x), maxScopes)
		}
		for _, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, errors.New("the scp claim holds a value that is not a string")
			}
			scopes = append(scopes, s)
		}
	default:
		return nil, fmt.Errorf("the %s claim is neither a string nor a list of strings", name)
	}
	if len(scopes) > maxScopes {
		return nil, fmt.Errorf("the %s claim holds %d scopes, over the limit of %d", name, len(scopes), maxScopes)
	}
	for _, s := range scopes {
		if problem := authz.ScopeProblem(s); problem != "" {
			return nil, fmt.Errorf("a scope in claim %s %s", name, problem)
		}
	}
	if len(scopes) == 0 {
		return nil, nil
	}
	slices.Sort(scopes)
	return slices.Compact(scopes), nil
}
