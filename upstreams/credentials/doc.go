// Package credentials supplies the Authorization of every request toolgate
// sends to an HTTP upstream whose config has an auth block other than
// static (docs/configuration.md, "Upstream credentials").
//
// It exists because one credential from the config file, sent for every
// caller, makes toolgate a confused deputy: whoever may call a tool acts
// upstream with the gateway's identity. Two modes fix that for OAuth
// protected upstreams:
//
//   - client_credentials: the gateway's own service identity (RFC 6749
//     section 4.4), with the upstream as audience/resource (RFC 8707). The
//     token is fetched with golang.org/x/oauth2/clientcredentials, the Go
//     team's maintained client: it speaks the token endpoint (client
//     authentication, error responses, expires_in) so this package does not
//     re-implement it. Its own TokenSource caching is not used: this package
//     keeps one token per upstream until shortly before it expires, lets one
//     refresh run at a time while the others keep using the still-valid
//     token (or wait for that one refresh when none is valid), and holds
//     back after a failure, so a thousand concurrent calls make one token
//     request, and an authorization server that is down is not hammered.
//   - token_exchange (RFC 8693): the caller's inbound JWT is exchanged, with
//     the gateway's client credentials, for a token whose audience/resource
//     is the upstream; the exchanged token is cached per (principal,
//     upstream, SHA-256 of the inbound token) until shortly before it
//     expires, in a bounded cache. The inbound token itself is never sent
//     upstream. A caller with no JWT (an API key, the stdio client,
//     anonymous) is refused (Refused), unless the operator configured
//     fallback: client_credentials. Requests no caller made (initialize,
//     listing, the listening stream) use the gateway's client credentials.
//     x/oauth2 has no token exchange, so that one form POST is written here.
//
// No token, secret or inbound JWT is ever logged, put in an error message,
// audited or counted: errors name the upstream, the token endpoint's host
// and the OAuth error code the server answered, nothing else.
//
// The caller reaches this package through the request's context: Options.Caller
// reads it (the gateway passes one that reads the authenticated subject).
package credentials
