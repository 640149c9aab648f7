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
}

// checkAddr accepts any host, not only loopback: binding wider is the operator's explicit choice (but see
// checkExposure). It marks a malformed address bad so that later checks do not pile on.
func (l *loader) checkAddr(path, addr string) {
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		l.reportAt(path, "expected host:port such as \"127.0.0.1:8080\", got %q", addr)
		l.bad[path] = true
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		l.reportAt(path, "expected a port number from 0 to 65535, got %q", port)
		l.bad[path] = true
	}
	if host != "" && net.ParseIP(host) == nil && !isHostname(host) {
		l.reportAt(path, "expected an IP address or host name before the port, got %q", host)
		l.bad[path] = true
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

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
