package config

import (
	"net"
	"strings"
)

// checkAdmin checks admin: the address like listen.http, the key like an API key hash (never echoed). A
// listener reachable from the network is allowed only with a key, as listen.http is only with credentials;
// and it must not be the MCP listener's address (but both may ask for a
// free port).
func (l *loader) checkAdmin(c *Config) {
	x := &c.Admin
	l.checkAddr("admin.listen", x.Listen)
	x.KeySHA256 = strings.ToLower(x.KeySHA256)
	if x.KeySHA256 != "" && !sha256Hex.MatchString(x.KeySHA256) {
		l.reportAt("admin.key_sha256", "expected 64 hex characters (the SHA-256 of the admin key, not the key; "+
			"`toolgate keys new admin` prints one), got %d characters", len(x.KeySHA256))
		l.bad["admin.key_sha256"] = true
		x.KeySHA256 = ""
	}
	if x.Listen == "" || l.bad["admin.listen"] {
		return
	}
	// Port 0 asks the system for a free port: two such listeners never
	// collide (tests and embedded gateways use it).
	if x.Listen == c.HTTPAddr() && !strings.HasSuffix(x.Listen, ":0") && !l.bad["listen.http"] {
		l.reportAt("admin.listen", "expected an address other than listen.http (%s): the admin API needs its own listener", c.HTTPAddr())
		return
	}
	host, _, err := net.SplitHostPort(x.Listen)
	if err == nil && !isLoopbackHost(host) && x.KeySHA256 == "" && !l.bad["admin.key_sha256"] {
		l.reportAt("admin.listen", "%s is reachable from the network but admin.key_sha256 is not set; "+
			"set it (`toolgate keys new admin` prints one) or keep the admin API on a loopback address", x.Listen)
	}
}

func (l *loader) checkApprovals(x *Approvals) {
	if x.File != "" && strings.TrimSpace(x.File) != x.File {
		l.reportAt("approvals.file", "expected a file path without leading or trailing spaces, got %q", x.File)
	}
	if strings.HasSuffix(x.File, "/") {
		l.reportAt("approvals.file", "expected a file, got the directory %q", x.File)
	}
	l.checkDuration("approvals.ttl", x.TTL, approvalTTLRange)
}
