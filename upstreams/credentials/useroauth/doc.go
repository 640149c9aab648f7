// Package useroauth is auth mode oauth: each caller reaches an OAuth protected
// upstream as themselves, with an access token the upstream's authorization
// server issued to them through the authorization code flow with PKCE
// (docs/configuration.md, "Upstream credentials"; docs/design.md, "Per-user
// upstream authorization").
//
// It is the MCP client side of the protocol's authorization: discovery from
// the upstream's 401 (the WWW-Authenticate resource_metadata parameter, or
// the well-known protected-resource locations) and the authorization
// server's metadata (OAuth or OpenID Connect, path-aware); client
// registration by a pre-registered client id, a Client ID Metadata Document,
// or dynamic registration, the registration kept in the vault; the resource
// parameter naming the upstream on every authorization and token request;
// PKCE S256 always. golang.org/x/oauth2 (the Go team's client) makes the
// code exchange and the refresh; this package adds what it lacks (discovery,
// registration) and how tokens are kept.
//
// Tokens live in a vault.Store (Kind OAuth, per principal and upstream), so
// every replica sees them; this package keeps a decoded copy in memory and
// goes back to the store when that copy is due. A token is refreshed at most
// once at a time per principal (callers wait for that one refresh); the
// rotated refresh token is stored before anyone uses the new access token. A
// refresh the authorization server refuses with invalid_grant deletes the
// token, and the call answers authorization_required again.
//
// Who lists: requests no caller made (initialize, tools/list, the listening
// stream) carry the token of Options.ListAs, the principal the operator chose
// (required: what they see is listed to every caller, so it is never left to
// whoever connected). Until they have connected, the upstream cannot be listed.
//
// The user's browser side (the consent link, the callback) is package
// upstreams/credentials/connect; it reaches this package through Begin and
// Complete.
package useroauth
