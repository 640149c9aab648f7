package config

import (
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/toolgate/toolgate/authn"
)

// The checks of the auth section: principals, API keys, JWT settings, and the rule that a gateway
// reachable from the network must ask for a credential.

func (l *loader) checkAuth(c *Config) {
	x := &c.Auth
	if x.StdioPrincipal != "" {
		l.checkPrincipal("auth.stdio_principal", x.StdioPrincipal)
	}
	if x.AllowAnonymous != "" {
		l.checkPrincipal("auth.allow_anonymous", x.AllowAnonymous)
	}
	if x.Resource != "" {
		l.checkIdentifierURL("auth.resource", x.Resource, "https://gw.example.com/mcp")
	}
	seen := map[string]string{} // hash -> path of the key that has it
	for i := range x.APIKeys {
		p := index("auth.api_keys", i)
		l.checkAPIKey(p, &x.APIKeys[i])
		if h := x.APIKeys[i].SHA256; h != "" {
			if first, dup := seen[h]; dup {
				l.reportAt(p+".sha256", "same key hash as %s (line %d); every API key must be distinct", first, l.lines[first])
			}
			seen[h] = p
		}
	}
	if x.JWT != nil {
		l.checkJWT("auth.jwt", x)
	}
	l.checkExposure(c)
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkAPIKey normalises the hash to lowercase. It never echoes the value: an operator who pasted the key
// itself instead of its hash must not find the key in a log.
func (l *loader) checkAPIKey(path string, k *APIKey) {
	pp, hp := path+".principal", path+".sha256"
	switch {
	case k.Principal != "":
		l.checkPrincipal(pp, k.Principal)
	case !l.bad[pp]:
		l.reportAt(path, "principal is required: who this key authenticates as")
	}
	k.SHA256 = strings.ToLower(k.SHA256)
	switch {
	case l.bad[hp]:
	case k.SHA256 == "":
		l.reportAt(path, "sha256 is required: the SHA-256 hex of the key (`toolgate keys new <principal>` prints it)")
	case !sha256Hex.MatchString(k.SHA256):
		l.reportAt(hp, "expected 64 hex characters (the SHA-256 of the key, not the key), got %d characters", len(k.SHA256))
		k.SHA256 = "" // a wrong hash must not take part in the duplicate check
	}
}

// checkPrincipal keeps principals usable as Casbin subjects: "," would split a policy line and "$" starts
// an expansion in some policy tooling; surrounding spaces make names that look equal but are not.
func (l *loader) checkPrincipal(path, p string) {
	switch {
	case strings.TrimSpace(p) != p:
		l.reportAt(path, "expected a principal name without leading or trailing spaces, got %q", p)
	case strings.ContainsAny(p, "$,"):
		l.reportAt(path, "expected a principal name without \"$\" or \",\" (they break Casbin policy lines), got %q", p)
	case strings.IndexFunc(p, isControl) >= 0:
		l.reportAt(path, "expected a principal name without control characters")
	}
}

// attrName is what policy conditions can read as principal.<name>.
var attrName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (l *loader) checkAttrName(e entry) {
	if !attrName.MatchString(e.key) {
		l.report(e.line, e.path, "expected an attribute name (letters, digits, _; not starting with a digit), which policy conditions read as principal.<name>")
	}
}

// jwtAlgorithms are the alg values auth.jwt.algorithms may list: asymmetric signatures only.
var jwtAlgorithms = authn.AcceptedAlgorithms()

// JWTAlgorithmAccepted reports whether auth.jwt.algorithms may list alg. none and the HS* family (shared
// secrets) never may.
func JWTAlgorithmAccepted(alg string) bool { return authn.AlgorithmAccepted(alg) }

func (l *loader) checkJWT(path string, a *Auth) {
	if l.bad[path] {
		return // not a mapping; already reported
	}
	j := a.JWT
	switch {
	case j.Issuer != "":
		l.checkIdentifierURL(path+".issuer", j.Issuer, "https://idp.example.com/")
	case !l.bad[path+".issuer"]:
		l.reportAt(path, "issuer is required: the iss of the identity provider's tokens, such as \"https://idp.example.com/\"")
	}
	if a.Resource == "" && !l.bad["auth.resource"] {
		l.reportAt(path, "auth.resource is required with jwt: this gateway's URI, such as \"https://gw.example.com/mcp\" "+
			"(the default audience, and the resource clients discover in its metadata)")
	}
	hasURL, hasFile := j.JWKSURL != "" || l.bad[path+".jwks_url"], j.JWKSFile != "" || l.bad[path+".jwks_file"]
	switch {
	case hasURL && hasFile:
		l.reportAt(path+".jwks_file", "set either jwks_url or jwks_file, not both")
	case !hasURL && !hasFile:
		l.reportAt(path, "jwks_url or jwks_file is required: where the identity provider's signing keys are")
	case j.JWKSURL != "":
		l.checkJWKSURL(path+".jwks_url", j.JWKSURL)
	}
	l.checkDuration(path+".jwks_refresh", j.JWKSRefresh, jwksRefreshRange)
	if s := j.ClockSkew; s != nil && (time.Duration(*s) < clockSkewRange.min || time.Duration(*s) > clockSkewRange.max) {
		l.reportAt(path+".clock_skew", "expected a duration from %s to %s, got %s", fmtDur(clockSkewRange.min), fmtDur(clockSkewRange.max), fmtDur(time.Duration(*s)))
	}
	l.checkClaimPath(path+".principal_claim", j.PrincipalClaim)
	l.checkClaimPath(path+".roles_claim", j.RolesClaim)
	first := map[string]string{}
	for i, name := range j.AttributeClaims {
		p := index(path+".attribute_claims", i)
		switch {
		case l.bad[p]:
		case !attrName.MatchString(name):
			l.reportAt(p, "expected a top-level claim name usable as an attribute (letters, digits, _; not starting with a digit), got %q", name)
		case first[name] != "":
			l.reportAt(p, "%q is already listed at %s", name, first[name])
		default:
			first[name] = p
		}
	}
	l.checkAlgorithms(path+".algorithms", j.Algorithms)
}

func (l *loader) checkAlgorithms(path string, algs []string) {
	if algs != nil && len(algs) == 0 && !l.bad[path] {
		l.reportAt(path, "expected at least one algorithm; leave the key out for the default %s", strings.Join(DefaultJWTAlgorithms(), ", "))
	}
	for i, alg := range algs {
		p := index(path, i)
		switch {
		case l.bad[p]:
		case strings.EqualFold(alg, "none"):
			l.reportAt(p, "none means unsigned tokens, which are never accepted; expected one of %s", strings.Join(jwtAlgorithms, ", "))
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			l.reportAt(p, "%s verifies with a shared secret, which toolgate does not accept (whoever holds it can mint tokens); "+
				"use an asymmetric algorithm such as RS256, ES256 or EdDSA", alg)
		case !JWTAlgorithmAccepted(alg):
			l.reportAt(p, "expected one of %s, got %q", strings.Join(jwtAlgorithms, ", "), alg)
		}
	}
}

// checkClaimPath accepts a claim name or a dotted path into nested objects (realm_access.roles). A name
// that itself contains dots (https://example.com/roles) also works: the whole string is tried first.
func (l *loader) checkClaimPath(path, claim string) {
	if claim == "" {
		return
	}
	if strings.IndexFunc(claim, func(r rune) bool { return isControl(r) || r == ' ' }) >= 0 ||
		strings.HasPrefix(claim, ".") || strings.HasSuffix(claim, ".") || strings.Contains(claim, "..") {
		l.reportAt(path, "expected a claim name or a dotted path such as realm_access.roles, got %q", claim)
	}
}

// checkIdentifierURL checks an identifier that other parties compare as a string: an absolute http(s) URL
// with a host and no user information, query or fragment (RFC 8414 issuers, RFC 8707 resources).
func (l *loader) checkIdentifierURL(path, raw, example string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		l.reportAt(path, "expected an absolute URL such as %q; it does not parse", example)
	case (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		l.reportAt(path, "expected an absolute http:// or https:// URL such as %q, got %q", example, u.Redacted())
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		l.reportAt(path, "expected a URL without user information, query or fragment, such as %q, got %q", example, u.Redacted())
	}
}

// checkJWKSURL requires https except on loopback: keys fetched over plain http can be swapped by anyone
// on the path, and whoever swaps them can mint tokens.
func (l *loader) checkJWKSURL(path, raw string) {
	l.checkURL(path, raw)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" || isLoopbackHost(u.Hostname()) {
		return
	}
	l.reportAt(path, "expected an https:// URL (plain http is accepted for loopback hosts only: keys fetched over it "+
		"can be swapped on the way), got %q", u.Redacted())
}

// checkExposure refuses a listener reachable from the network that would let anyone in: with no API key
// and no JWT configured, every caller would be anonymous or refused, and the operator must say which.
func (l *loader) checkExposure(c *Config) {
	a := &c.Auth
	if c.Listen.HTTP == "" || len(a.APIKeys) > 0 || a.JWT != nil || a.AllowAnonymous != "" ||
		l.bad["listen.http"] || l.bad["auth.api_keys"] || l.bad["auth.jwt"] || l.bad["auth.allow_anonymous"] {
		return
	}
	host, _, err := net.SplitHostPort(c.Listen.HTTP)
	if err != nil || isLoopbackHost(host) {
		return // a malformed address is reported by checkAddr
	}
	l.reportAt("listen.http", "%s is reachable from the network but no credential is configured; "+
		"add auth.api_keys or auth.jwt, or set auth.allow_anonymous to accept unauthenticated calls", c.Listen.HTTP)
}

// isLoopbackHost reports whether host can only be reached from this machine: "localhost" or a loopback
// IP. Other names are not resolved (the answer could change); an empty host means every interface.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
