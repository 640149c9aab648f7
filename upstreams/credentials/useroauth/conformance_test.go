package useroauth_test

import (
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/credentials/useroauth"
)

// A Source is what upstreams asks an HTTP upstream's requests to be authorized by, and it answers
// for its callers when the upstream refuses their token.
var (
	_ upstreams.Credentials     = (*useroauth.Source)(nil)
	_ upstreams.CallerRejecter  = (*useroauth.Source)(nil)
	_ upstreams.ScopeChallenger = (*useroauth.Source)(nil)
)
