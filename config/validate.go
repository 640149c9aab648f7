package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The checks below run after decoding, on the typed values, and point at lines through l.lines. Values
// that failed to decode are zero here, so they are not reported twice.

type durRange struct{ min, max time.Duration }
type byteRange struct{ min, max int64 }

func (l *loader) checkDuration(path string, d Duration, r durRange) {
	if d != 0 && (time.Duration(d) < r.min || time.Duration(d) > r.max) {
		l.reportAt(path, "expected a duration from %s to %s, got %s", fmtDur(r.min), fmtDur(r.max), fmtDur(time.Duration(d)))
	}
}

func (l *loader) checkBytes(path string, n int64, r byteRange) {
	if n != 0 && (n < r.min || n > r.max) {
		l.reportAt(path, "expected a number of bytes from %s to %s, got %d", fmtBytes(r.min), fmtBytes(r.max), n)
	}
}

// fmtDur drops the zero tails time.Duration prints ("10m0s" -> "10m") so ranges read as written in YAML.
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func fmtBytes(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d (%d MiB)", n, n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d (%d KiB)", n, n>>10)
	}
	return strconv.FormatInt(n, 10)
}

func (l *loader) checkLimits(path string, x Limits) {
	l.checkDuration(child(path, "timeout"), x.Timeout, timeoutRange)
	l.checkBytes(child(path, "max_result_bytes"), x.MaxResultBytes, maxResultRange)
	l.checkDuration(child(path, "init_timeout"), x.InitTimeout, initTimeoutRange)
}

func (l *loader) checkListen(x *Listen) {
	l.checkAddr("listen.http", x.HTTP)
	l.checkBytes("listen.max_body_bytes", x.MaxBodyBytes, maxBodyRange)
	l.checkDuration("listen.session_idle_ttl", x.SessionIdleTTL, sessionIdleRange)
	for i, o := range x.AllowedOrigins {
		x.AllowedOrigins[i] = l.checkOrigin(index("listen.allowed_origins", i), o)
	}
	if x.AnonymousPrincipal != "" {
		l.checkPrincipal("listen.anonymous_principal", x.AnonymousPrincipal)
	}
	if x.AllowAnonymous && x.AnonymousPrincipal == "" && !l.bad["listen.anonymous_principal"] {
		l.reportAt("listen.allow_anonymous", "allow_anonymous: true needs anonymous_principal, the principal unauthenticated callers act as")
	}
}

// checkAddr accepts any host, not only loopback: binding wider is the operator's explicit choice.
func (l *loader) checkAddr(path, addr string) {
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		l.reportAt(path, "expected host:port such as \"127.0.0.1:8080\", got %q", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		l.reportAt(path, "expected a port number from 0 to 65535, got %q", port)
	}
	if host != "" && net.ParseIP(host) == nil && !isHostname(host) {
		l.reportAt(path, "expected an IP address or host name before the port, got %q", host)
	}
}

var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

func isHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if !hostLabel.MatchString(label) {
			return false
		}
	}
	return true
}

// checkOrigin requires the exact form browsers send (scheme://host[:port]) and returns it lowercased, as
// browsers serialise it, so the HTTP layer can compare strings. "*" is refused: it would switch off the
// DNS-rebinding protection the list exists for.
func (l *loader) checkOrigin(path, o string) string {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		l.reportAt(path, "expected an origin such as \"https://app.example.com\" (scheme://host[:port], no path), got %q", o)
		return o
	}
	return strings.ToLower(o)
}

func (l *loader) checkAuth(x *Auth) {
	if x.StdioPrincipal != "" {
		l.checkPrincipal("auth.stdio_principal", x.StdioPrincipal)
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

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
