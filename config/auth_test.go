package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// jwtBase is a valid JWT setup on lines 1-5; cases append one line to it.
const jwtBase = "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt:\n    issuer: \"https://idp.example.com/\"\n    jwks_url: \"https://idp.example.com/jwks.json\"\n"

// authProblems are TestProblems rows for the auth section.
var authProblems = []problemCase{
	{"resource not a URL", "auth: {resource: gw.example.com}\n", nil, 1, "auth.resource",
		`expected an absolute http:// or https:// URL such as "https://gw.example.com/mcp", got "gw.example.com"`},
	{"resource with fragment", "auth: {resource: \"https://gw.example.com/mcp#x\"}\n", nil, 1, "auth.resource", "without user information, query or fragment"},
	{"resource with query", "auth: {resource: \"https://gw.example.com/mcp?v=1\"}\n", nil, 1, "auth.resource", "without user information, query or fragment"},
	{"resource with user", "auth: {resource: \"https://me:pw@gw.example.com/mcp\"}\n", nil, 1, "auth.resource", `got "https://me:xxxxx@gw.example.com/mcp"`},
	{"attribute name with a dash", "auth:\n  api_keys:\n    - {principal: bob, sha256: " + hashA + ", attributes: {re-gion: eu}}\n", nil, 3,
		"auth.api_keys[0].attributes.re-gion", "expected an attribute name (letters, digits, _; not starting with a digit), which policy conditions read as principal.<name>"},
	{"attribute value not a string", "auth:\n  api_keys:\n    - principal: bob\n      sha256: " + hashA + "\n      attributes: {tier: 2}\n", nil, 5,
		"auth.api_keys[0].attributes.tier", `expected a string, got the number 2 (quote it: "2")`},
	{"attributes not a mapping", "auth:\n  api_keys:\n    - {principal: bob, sha256: " + hashA + ", attributes: [eu]}\n", nil, 3,
		"auth.api_keys[0].attributes", "expected a mapping of names to strings, got a list"},
	{"jwt not a mapping", "auth: {resource: \"https://gw.example.com/mcp\", jwt: yes}\n", nil, 1, "auth.jwt", "expected a mapping with keys algorithms, attribute_claims, audience"},
	{"unknown jwt key", jwtBase + "    jwks_uri: x\n", nil, 6, "auth.jwt.jwks_uri", `unknown key; allowed keys here: algorithms, attribute_claims, audience, clock_skew, issuer, jwks_file, jwks_refresh, jwks_url, principal_claim, roles_claim (did you mean "jwks_url"?)`},
	{"jwt without issuer", "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt:\n    jwks_file: jwks.json\n", nil, 3, "auth.jwt",
		`issuer is required: the iss of the identity provider's tokens, such as "https://idp.example.com/"`},
	{"issuer not a URL", "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt: {issuer: idp, jwks_file: jwks.json}\n", nil, 3, "auth.jwt.issuer",
		`expected an absolute http:// or https:// URL such as "https://idp.example.com/", got "idp"`},
	{"jwt without resource", "auth:\n  jwt: {issuer: \"https://idp.example.com/\", jwks_file: jwks.json}\n", nil, 2, "auth.jwt",
		`auth.resource is required with jwt: this gateway's URI, such as "https://gw.example.com/mcp"`},
	{"jwt without keys", "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt: {issuer: \"https://idp.example.com/\"}\n", nil, 3, "auth.jwt",
		"jwks_url or jwks_file is required: where the identity provider's signing keys are"},
	{"both jwks_url and jwks_file", jwtBase + "    jwks_file: jwks.json\n", nil, 6, "auth.jwt.jwks_file", "set either jwks_url or jwks_file, not both"},
	{"jwks_url over plain http", "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt: {issuer: \"https://idp.example.com/\", jwks_url: \"http://idp.example.com/jwks\"}\n", nil, 3,
		"auth.jwt.jwks_url", `expected an https:// URL (plain http is accepted for loopback hosts only: keys fetched over it can be swapped on the way), got "http://idp.example.com/jwks"`},
	{"jwks_url not http", "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt: {issuer: \"https://idp.example.com/\", jwks_url: \"file:///etc/jwks\"}\n", nil, 3,
		"auth.jwt.jwks_url", `expected an http:// or https:// URL, got "file:///etc/jwks"`},
	{"jwks_refresh too short", jwtBase + "    jwks_refresh: 30s\n", nil, 6, "auth.jwt.jwks_refresh", "expected a duration from 1m to 24h, got 30s"},
	{"jwks_refresh too long", jwtBase + "    jwks_refresh: 25h\n", nil, 6, "auth.jwt.jwks_refresh", "expected a duration from 1m to 24h, got 25h"},
	{"clock_skew negative", jwtBase + "    clock_skew: -1s\n", nil, 6, "auth.jwt.clock_skew", "expected a duration from 0s to 5m, got -1s"},
	{"clock_skew too large", jwtBase + "    clock_skew: 6m\n", nil, 6, "auth.jwt.clock_skew", "expected a duration from 0s to 5m, got 6m"},
	{"clock_skew as a number", jwtBase + "    clock_skew: 60\n", nil, 6, "auth.jwt.clock_skew", `expected a duration such as "8s", got the number 60 (write "60s" or another unit)`},
	{"algorithm none", jwtBase + "    algorithms: [RS256, none]\n", nil, 6, "auth.jwt.algorithms[1]", "none means unsigned tokens, which are never accepted; expected one of RS256"},
	{"algorithm HS256", jwtBase + "    algorithms: [HS256]\n", nil, 6, "auth.jwt.algorithms[0]",
		"HS256 verifies with a shared secret, which toolgate does not accept (whoever holds it can mint tokens); use an asymmetric algorithm such as RS256, ES256 or EdDSA"},
	{"algorithm unknown", jwtBase + "    algorithms: [rs256]\n", nil, 6, "auth.jwt.algorithms[0]",
		`expected one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, got "rs256"`},
	{"algorithms empty", jwtBase + "    algorithms: []\n", nil, 6, "auth.jwt.algorithms", "expected at least one algorithm; leave the key out for the default RS256, ES256, EdDSA"},
	{"algorithms not a list", jwtBase + "    algorithms: RS256\n", nil, 6, "auth.jwt.algorithms", `expected a list of strings, got the string "RS256"`},
	{"attribute claim with a path", jwtBase + "    attribute_claims: [org.region]\n", nil, 6, "auth.jwt.attribute_claims[0]",
		`expected a top-level claim name usable as an attribute (letters, digits, _; not starting with a digit), got "org.region"`},
	{"attribute claim twice", jwtBase + "    attribute_claims: [region, region]\n", nil, 6, "auth.jwt.attribute_claims[1]", `"region" is already listed at auth.jwt.attribute_claims[0]`},
	{"empty segment in roles claim", jwtBase + "    roles_claim: realm_access..roles\n", nil, 6, "auth.jwt.roles_claim",
		`expected a claim name or a dotted path such as realm_access.roles, got "realm_access..roles"`},
	{"space in principal claim", jwtBase + "    principal_claim: \"preferred username\"\n", nil, 6, "auth.jwt.principal_claim", "expected a claim name or a dotted path"},
	{"all interfaces without credential", "listen: {http: \"0.0.0.0:8080\"}\n", nil, 1, "listen.http",
		"0.0.0.0:8080 is reachable from the network but no credential is configured; add auth.api_keys or auth.jwt, or set auth.allow_anonymous to accept unauthenticated calls"},
	{"empty host without credential", "listen: {http: \":8080\"}\n", nil, 1, "listen.http", ":8080 is reachable from the network but no credential is configured"},
	{"host name without credential", "listen: {http: \"gw.example.com:8080\"}\n", nil, 1, "listen.http", "is reachable from the network"},
	{"IPv6 without credential", "listen: {http: \"[::]:8080\"}\n", nil, 1, "listen.http", "[::]:8080 is reachable from the network"},
	{"empty api_keys list is no credential", "listen: {http: \"10.0.0.1:8080\"}\nauth: {api_keys: []}\n", nil, 1, "listen.http", "is reachable from the network"},
}

// TestExposure: a listener reachable from the network loads only when some credential is configured or
// the operator opted into anonymous calls; loopback listeners always load.
func TestExposure(t *testing.T) {
	const key = "auth:\n  api_keys:\n    - {principal: alice, sha256: " + hashA + "}\n"
	const jwt = "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt: {issuer: \"https://idp.example.com/\", jwks_file: jwks.json}\n"
	tests := []struct {
		name, src string
		loopback  bool
	}{
		{"default address", "", true},
		{"IPv4 loopback", "listen: {http: \"127.0.0.1:9000\"}\n", true},
		{"other 127/8 address", "listen: {http: \"127.0.0.2:9000\"}\n", true},
		{"IPv6 loopback", "listen: {http: \"[::1]:9000\"}\n", true},
		{"localhost", "listen: {http: \"localhost:9000\"}\n", true},
		{"network with API key", "listen: {http: \"0.0.0.0:8080\"}\n" + key, false},
		{"network with JWT", "listen: {http: \"0.0.0.0:8080\"}\n" + jwt, false},
		{"network with anonymous", "listen: {http: \"0.0.0.0:8080\"}\nauth: {allow_anonymous: guest}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("toolgate.yaml", []byte(tt.src), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if c.HTTPLoopback() != tt.loopback {
				t.Fatalf("HTTPLoopback() = %v, want %v", c.HTTPLoopback(), tt.loopback)
			}
		})
	}
}

// TestJWTSettings loads each JWT key and reads it back through its accessor.
func TestJWTSettings(t *testing.T) {
	const head = "auth:\n  resource: \"https://gw.example.com/mcp\"\n  jwt:\n    issuer: \"https://idp.example.com/\"\n    jwks_url: \"http://127.0.0.1:9999/jwks\"\n"
	tests := []struct {
		name      string
		extra     string
		got       func(c *Config) any
		want      any
		wantField func(j *JWT) any
	}{
		{"audience defaults to resource", "", func(c *Config) any { return c.JWTAudience() }, "https://gw.example.com/mcp", nil},
		{"explicit audience", "    audience: api://toolgate\n", func(c *Config) any { return c.JWTAudience() }, "api://toolgate", nil},
		{"jwks_refresh default", "", func(c *Config) any { return c.JWKSRefresh() }, 10 * time.Minute, nil},
		{"jwks_refresh", "    jwks_refresh: 1h\n", func(c *Config) any { return c.JWKSRefresh() }, time.Hour, nil},
		{"clock_skew default", "", func(c *Config) any { return c.JWTClockSkew() }, 60 * time.Second, nil},
		{"clock_skew explicit zero", "    clock_skew: 0s\n", func(c *Config) any { return c.JWTClockSkew() }, time.Duration(0), nil},
		{"clock_skew empty value means default", "    clock_skew:\n", func(c *Config) any { return c.JWTClockSkew() }, 60 * time.Second, nil},
		{"clock_skew at the maximum", "    clock_skew: 5m\n", func(c *Config) any { return c.JWTClockSkew() }, 5 * time.Minute, nil},
		{"principal_claim default", "", func(c *Config) any { return c.JWTPrincipalClaim() }, "sub", nil},
		{"principal_claim", "    principal_claim: email\n", func(c *Config) any { return c.JWTPrincipalClaim() }, "email", nil},
		{"algorithms default", "", func(c *Config) any { return strings.Join(c.JWTAlgorithms(), ",") }, "RS256,ES256,EdDSA", nil},
		{"algorithms", "    algorithms: [PS256, ES384]\n", func(c *Config) any { return strings.Join(c.JWTAlgorithms(), ",") }, "PS256,ES384", nil},
		{"roles_claim path", "    roles_claim: realm_access.roles\n", nil, "realm_access.roles", func(j *JWT) any { return j.RolesClaim }},
		{"namespaced roles claim", "    roles_claim: \"https://toolgate.example/roles\"\n", nil, "https://toolgate.example/roles", func(j *JWT) any { return j.RolesClaim }},
		{"attribute_claims", "    attribute_claims: [region, tier]\n", nil, "region,tier", func(j *JWT) any { return strings.Join(j.AttributeClaims, ",") }},
		{"jwks_url on loopback may be http", "", nil, "http://127.0.0.1:9999/jwks", func(j *JWT) any { return j.JWKSURL }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("toolgate.yaml", []byte(head+tt.extra), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if tt.got != nil {
				got = tt.got(c)
			} else {
				got = tt.wantField(c.Auth.JWT)
			}
			if got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestJWTAlgorithmsIsACopy: callers may change the slice they get without changing the config.
func TestJWTAlgorithmsIsACopy(t *testing.T) {
	c := &Config{Auth: Auth{JWT: &JWT{Algorithms: []string{"RS256"}}}}
	c.JWTAlgorithms()[0] = "none"
	DefaultJWTAlgorithms()[0] = "none"
	if c.Auth.JWT.Algorithms[0] != "RS256" || !slices.Equal((&Config{}).JWTAlgorithms(), []string{"RS256", "ES256", "EdDSA"}) {
		t.Fatal("a caller changed the configuration through the returned slice")
	}
}

// TestAnonymousAndAttributes: allow_anonymous is a principal name; API-key attributes arrive as written.
func TestAnonymousAndAttributes(t *testing.T) {
	src := "auth:\n  allow_anonymous: guest\n  api_keys:\n    - principal: bob\n      sha256: " + hashA + "\n      attributes: {region: eu, tier: \"${TIER}\"}\n"
	c, err := Parse("toolgate.yaml", []byte(src), envOf(map[string]string{"TIER": "gold"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.AllowAnonymous != "guest" {
		t.Errorf("AllowAnonymous = %q", c.Auth.AllowAnonymous)
	}
	if a := c.Auth.APIKeys[0].Attributes; len(a) != 2 || a["region"] != "eu" || a["tier"] != "gold" {
		t.Errorf("attributes = %v", a)
	}
	if c.Auth.JWT != nil {
		t.Errorf("JWT configured without a jwt key: %+v", c.Auth.JWT)
	}
}
