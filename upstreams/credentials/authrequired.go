package credentials

import (
	"fmt"
	"strings"
)

// AuthorizationRequiredError is a request not sent because the upstream acts as the calling user (auth
// mode oauth or per_user) and holds no credential of theirs yet. The call answers
// authorization_required (upstreams.AuthorizationRequired finds it) with a message that tells the
// user where to supply one: ConnectURL, the gateway page where they connect, or, without one, the
// operator command that sets it.
type AuthorizationRequiredError struct {
	Server     string
	Mode       Mode   // OAuth or PerUser
	ConnectURL string // "" when the gateway offers no page to connect (the operator sets the credential)
	// Rejected is true when the upstream refused the credential stored for the caller (HTTP 401): it
	// was revoked or replaced upstream, and a new one is needed.
	Rejected bool
}

func (e *AuthorizationRequiredError) Error() string {
	return fmt.Sprintf("upstream %q (auth mode %s) holds no usable credential of the caller's", e.Server, e.Mode)
}

// AuthorizationRequired is the message for the caller; it names no secret.
func (e *AuthorizationRequiredError) AuthorizationRequired() string {
	var b strings.Builder
	what := "secret"
	if e.Mode == OAuth {
		what = "authorization"
	}
	if e.Rejected {
		fmt.Fprintf(&b, "server %q acts as you, and refused the %s stored for you (revoked or replaced); ", e.Server, what)
	} else {
		fmt.Fprintf(&b, "server %q acts as you, and holds no %s of yours yet; ", e.Server, what)
	}
	if e.ConnectURL != "" {
		fmt.Fprintf(&b, "open %s in a browser to connect, then repeat the call", e.ConnectURL)
	} else {
		b.WriteString("ask an operator to set it (toolgate credentials set), then repeat the call")
	}
	return b.String()
}
