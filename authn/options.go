package authn

import (
	"cmp"
	"slices"
	"time"
)

// Options is everything New needs. authn reads no configuration: the gateway turns its config into
// Options (gateway/options.go). A zero field means the default documented on it, so Options{} is an
// Authenticator that accepts no credential at all. The defaults are the constants below; config's
// accessors use the same constants.
type Options struct {
	// Resource is this gateway's resource URI (RFC 8707, RFC 9728), e.g. "https://gw.example.com/mcp": the
	// default JWT audience and the "resource" of the protected-resource metadata. "" means no metadata is
	// served and challenges carry no resource_metadata. Required with JWT.
	Resource string
	// AllowAnonymous, when non-empty, is the principal requests without any Authorization header act as.
	// "" means they get 401. A request that presents a bad credential is never downgraded to anonymous.
	AllowAnonymous string
	// APIKeys are the accepted bearer keys, by their SHA-256. New copies them.
	APIKeys []APIKey
	// JWT, when set, accepts JWT bearer tokens from an identity provider beside the API keys. nil means
	// JWT bearer tokens are not accepted.
	JWT *JWTOptions
}

// APIKey is one accepted bearer key, stored only as its SHA-256.
type APIKey struct {
	Principal string // who the key authenticates as; a key without a principal never matches
	SHA256    string // the hex SHA-256 of the key ([HashKey]), in either case
	// Attributes are given to every request made with this key; policy conditions read them as
	// principal.<name>. nil means none.
	Attributes map[string]string
}

// JWTOptions configures JWT bearer tokens. Issuer, and exactly one of JWKSURL and JWKSFile, are required;
// every other zero field means its default.
type JWTOptions struct {
	Issuer   string // the iss claim must equal it exactly
	Audience string // the aud claim must contain it; "" means Options.Resource
	JWKSURL  string // where the signing keys are fetched from (https, or http on loopback)
	JWKSFile string // a JWK Set file, read as given (config makes it absolute, relative to the config file)
	// Refresh is how often the key set is fetched (or the file re-read) again. 0 (or negative) means
	// DefaultJWKSRefresh.
	Refresh time.Duration
	// ClockSkew is the leeway for exp, nbf and iat. 0 means DefaultClockSkew; NoClockSkew (any negative
	// value) means no leeway.
	ClockSkew time.Duration
	// PrincipalClaim names the claim (or dotted path) that holds the principal. "" means
	// DefaultPrincipalClaim.
	PrincipalClaim string
	// RolesClaim names the claim (or dotted path, e.g. realm_access.roles) whose values become the
	// request's roles. "" means tokens grant no roles.
	RolesClaim string
	// AttributeClaims are top-level claims copied, when they hold strings, into the subject's attributes.
	AttributeClaims []string
	// Algorithms are the accepted alg values. Empty means DefaultAlgorithms(). Any value that is not in
	// AcceptedAlgorithms() (none, HS*) is dropped; if none remains, New fails.
	Algorithms []string
}

const (
	// DefaultJWKSRefresh is how often a JWT key set is fetched (or its file re-read) again: 10 minutes.
	DefaultJWKSRefresh = 10 * time.Minute
	// DefaultClockSkew is the leeway for a token's exp, nbf and iat: 60 seconds.
	DefaultClockSkew = 60 * time.Second
	// NoClockSkew, as JWTOptions.ClockSkew, checks exp, nbf and iat with no leeway (0 means the default).
	NoClockSkew time.Duration = -1
	// DefaultPrincipalClaim is the claim that names the principal of a JWT.
	DefaultPrincipalClaim = "sub"
)

// DefaultAlgorithms are the signature algorithms accepted when JWTOptions.Algorithms is empty. It returns
// a new slice each time, so callers may keep or change it.
func DefaultAlgorithms() []string { return []string{"RS256", "ES256", "EdDSA"} }

// AcceptedAlgorithms are every alg value JWTOptions.Algorithms may list: asymmetric signatures only. It
// returns a new slice each time.
func AcceptedAlgorithms() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

// AlgorithmAccepted reports whether JWTOptions.Algorithms may list alg. none and the HS* family (shared
// secrets) never may.
func AlgorithmAccepted(alg string) bool { return slices.Contains(AcceptedAlgorithms(), alg) }

// jwtSettings are JWTOptions with the defaults applied.
type jwtSettings struct {
	audience       string
	refresh        time.Duration
	leeway         time.Duration // 0: none
	principalClaim string
	algorithms     []string // only accepted ones; may be empty
}

// resolve applies the defaults to j; resource is Options.Resource, the default audience. This is the one
// place a zero JWTOptions field becomes its default.
func (j *JWTOptions) resolve(resource string) jwtSettings {
	s := jwtSettings{
		audience:       cmp.Or(j.Audience, resource),
		refresh:        j.Refresh,
		leeway:         j.ClockSkew,
		principalClaim: cmp.Or(j.PrincipalClaim, DefaultPrincipalClaim),
		algorithms:     slices.Clone(j.Algorithms),
	}
	if s.refresh <= 0 {
		s.refresh = DefaultJWKSRefresh
	}
	switch {
	case s.leeway == 0:
		s.leeway = DefaultClockSkew
	case s.leeway < 0:
		s.leeway = 0
	}
	if len(s.algorithms) == 0 {
		s.algorithms = DefaultAlgorithms()
	}
	s.algorithms = slices.DeleteFunc(s.algorithms, func(alg string) bool { return !AlgorithmAccepted(alg) })
	return s
}
