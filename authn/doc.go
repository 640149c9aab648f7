// Package authn turns the credential on an HTTP request into an [authz.Subject]: who is calling, the roles
// the credential itself grants, and the attributes policy conditions may read. It decides nothing about
// what the caller may do; that is package authz.
//
// # Options
//
// [New] takes [Options], not the configuration: authn does not import package config (config imports
// authn, for the defaults). The gateway turns the auth section of its config into Options
// (gateway.AuthnOptions); each field is one key of that section (JWTOptions.Refresh is
// auth.jwt.jwks_refresh), and error messages name the config keys, since that is where an operator fixes
// them. A zero field means its default, and the defaults are this package's constants
// ([DefaultJWKSRefresh], [DefaultClockSkew], [DefaultPrincipalClaim], [DefaultAlgorithms]), which
// config's accessors use too, so they are written once.
//
// # Credentials
//
// A request carries at most one credential, in `Authorization: Bearer <token>`:
//
//   - A token shaped like a JWT (three base64url segments separated by dots) is verified as a JWT when
//     Options.JWT is set. Otherwise, and for every other token, it is an API key, looked up by its
//     SHA-256 (apikeys.go). Keys minted by `toolgate keys new` ([NewKey]) never contain a dot, so the two
//     cannot be confused.
//   - No Authorization header at all: the caller is Options.AllowAnonymous when it is set, else
//     the request gets 401 with a challenge. A request that presents a credential which fails (a wrong
//     key, a bad token, another scheme such as Basic) is never downgraded to anonymous.
//   - A token in the query string (access_token, RFC 6750 §2.3) is refused with 400 even when a header is
//     present too, because URLs end up in logs and browser history. So are two Authorization headers.
//
// Every failure is a *[Failure]: the status, the full WWW-Authenticate value (RFC 6750 §3, with
// resource_metadata from RFC 9728 §5.1), and a Reason for the log that never reaches the client; the
// client only sees a generic error_description.
//
// # API keys
//
// [NewKey] mints a key for `toolgate keys new`: "tg_" ([KeyPrefix]) and 32 bytes from crypto/rand in
// base64url. Configuration, and so [APIKey], holds only its SHA-256 hex ([HashKey]), with the principal
// and the attributes the key authenticates as. A presented key is hashed once and looked up by that hash,
// so its own bytes are never compared.
//
// # Reloading API keys
//
// [Authenticator.ReplaceAPIKeys] swaps the whole key set in one atomic store (the gateway calls it when
// its config file changes, or on SIGHUP). Authenticate loads the set once per request, so a request
// sees the old set or the new one, never a mix, and a key removed by a swap is refused from the next
// request on. There is no session state here: an HTTP client's MCP session authenticates every request
// by its bearer token, so a session opened with a key that is later revoked gets 401 on its next
// request. What changed ([KeyChange]) is counts and principals, never a key or a key's hash. Only the
// keys are swapped; JWT settings, the anonymous principal and the resource are fixed at New.
//
// # JWT rules
//
// A JWT is accepted only if all of these hold (the names are fields of [JWTOptions]): its alg is in
// Algorithms (none and HS* can never be listed, and the parser is also told the allowed list, so alg
// confusion with a public key used as an HMAC secret fails); its signature verifies with a key from the
// JWK Set whose kid matches (a JWK with an alg must match the token's alg, and keys marked "use":"enc" are
// ignored); it has no "crit" header; iss equals Issuer exactly; aud contains the audience (Audience,
// default Options.Resource); exp is present and not passed, and nbf and iat are not in the future, each
// with ClockSkew of leeway (default 60s). Header parameters that point at keys (jku, x5u, jwk) are
// ignored: keys come only from the configured JWK Set.
//
// The principal is the PrincipalClaim (default sub): a non-empty string without "$", ",", control
// characters or surrounding spaces, the same rule as principals in config, or the token is refused. A
// claim name is looked up as written first, then as a dotted path into nested objects, so both
// "realm_access.roles" (Keycloak) and "https://example.com/roles" (namespaced claims) work. The roles
// claim may be a list of strings or one string of space-separated roles (as scope is); a role that could
// not be a policy subject refuses the token rather than being dropped silently. AttributeClaims whose
// values are strings become Subject.Attrs; other values are skipped. Note that the principal is taken as
// the identity provider states it: a claim users can edit themselves (a display name, sometimes
// preferred_username) lets them choose their principal.
//
// # JWT signing keys
//
// JWKSFile is read at New (an unreadable or invalid file is an error naming it), re-read every Refresh
// (default 10m), and re-read when a token names an unknown kid (at most once per 30s). A re-read that
// fails keeps the keys already loaded.
//
// JWKSURL is fetched at New with a 10s bound; if the identity provider is unreachable the gateway still
// starts, logs it, and JWT calls fail until a fetch succeeds. It is fetched again every Refresh and when
// a token names an unknown kid, at most once per 30s however many such tokens arrive: a request that
// cannot refresh fails at once rather than waiting. A refresh that fails keeps the keys already loaded.
// The body is capped at 1 MiB, and redirects to plain http are refused (http is accepted only for
// loopback hosts, as config requires of the URL itself).
//
// # Library
//
// Signatures and claims are checked by github.com/golang-jwt/jwt/v5, and keys are fetched, cached and
// refreshed by github.com/MicahParks/jwkset through github.com/MicahParks/keyfunc/v3. golang-jwt is the
// most used JWT library in Go, has no dependencies, and its parser options map one to one onto the rules
// above (WithValidMethods, WithIssuer, WithAudience, WithLeeway, WithTimeFunc for an injectable clock,
// WithExpirationRequired, WithIssuedAt); it refuses alg none unless handed a sentinel key we never pass.
// keyfunc is the JWK Set companion its README points to, and jwkset provides the refresh goroutine, the
// rate-limited refresh on an unknown kid, keeping keys across failed refreshes, and JWK validation, with
// only golang.org/x/time beyond the standard library. lestrrat-go/jwx v3 would do as well but brings a
// larger dependency tree and its own HTTP cache client, and its docs advise against its cache for key sets
// that may be unavailable at times; go-jose v4 verifies well but has no key-set cache, which we would have
// had to write. No cryptography is implemented here.
//
// # Resource metadata
//
// When Options.Resource is set, [Authenticator.ProtectedResourceMetadata] serves RFC 9728 metadata:
// resource, authorization_servers (the issuer, when JWT is configured), bearer_methods_supported
// ["header"], and resource_name. Its URL follows RFC 9728 §3.1: the well-known path is inserted between
// the resource's host and its path, so resource https://gw.example.com/mcp has its metadata at
// https://gw.example.com/.well-known/oauth-protected-resource/mcp; that URL is what resource_metadata in
// WWW-Authenticate names. [Authenticator.MetadataPaths] lists where to mount the handler: that path, and
// the bare /.well-known/oauth-protected-resource for clients that only try the root.
package authn
