package credentials

import "github.com/toolgate/toolgate/upstreams"

// A Source is what upstreams asks an HTTP upstream's requests to be authorized by.
var _ upstreams.Credentials = (*Source)(nil)
