package config

import (
	"cmp"
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
type countRange struct{ min, max int }
type numRange struct{ min, max float64 }

// checkDuration reports d when it is outside r, and returns whether it was in range (or zero).
func (l *loader) checkDuration(path string, d Duration, r durRange) bool {
	if d != 0 && (time.Duration(d) < r.min || time.Duration(d) > r.max) {
		l.reportAt(path, "expected a duration from %s to %s, got %s", fmtDur(r.min), fmtDur(r.max), fmtDur(time.Duration(d)))
		return false
	}
	return true
}

func (l *loader) checkCount(path string, n int, r countRange) {
	if n != 0 && (n < r.min || n > r.max) {
		l.reportAt(path, "expected a whole number from %d to %d, got %d", r.min, r.max, n)
	}
}

// checkNumber checks an optional number; unlike the other checks, an explicit 0 is checked too.
func (l *loader) checkNumber(path string, f *float64, r numRange) {
	if f != nil && (*f < r.min || *f > r.max) {
		l.reportAt(path, "expected a number from %s to %s, got %s", fmtNum(r.min), fmtNum(r.max), fmtNum(*f))
	}
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

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

// checkLimits checks the limits written at one level (limits, a server or a tool); inherited is what the
// level falls back to (limits for a server, nothing for limits itself), for the checks across keys.
func (l *loader) checkLimits(path string, x, inherited Limits) {
	l.checkDuration(child(path, "timeout"), x.Timeout, timeoutRange)
	l.checkBytes(child(path, "max_result_bytes"), x.MaxResultBytes, maxResultRange)
	l.checkDuration(child(path, "init_timeout"), x.InitTimeout, initTimeoutRange)
	l.checkCount(child(path, "max_in_flight"), x.MaxInFlight, maxInFlightRange)
	l.checkBytes(child(path, "max_argument_bytes"), x.MaxArgumentBytes, maxArgumentRange) // limits only: no server has them
	l.checkCount(child(path, "max_argument_depth"), x.MaxArgumentDepth, argumentDepthRange)
	bp := child(path, "breaker")
	l.checkCount(child(bp, "failures"), x.Breaker.Failures, failuresRange)
	l.checkDuration(child(bp, "open_for"), x.Breaker.OpenFor, openForRange)
	l.checkCount(child(bp, "half_open_probes"), x.Breaker.HalfOpenProbes, halfOpenProbesRange)
	rp := child(path, "retry")
	l.checkCount(child(rp, "max_attempts"), x.Retry.MaxAttempts, maxAttemptsRange)
	baseOK := l.checkDuration(child(rp, "base_delay"), x.Retry.BaseDelay, baseDelayRange)
	maxOK := l.checkDuration(child(rp, "max_delay"), x.Retry.MaxDelay, maxDelayRange)
	if baseOK && maxOK {
		l.checkDelayOrder(rp, x.Retry, inherited.Retry)
	}
}

// checkDelayOrder requires max_delay >= base_delay as they will apply, inherited values and defaults
// included, but only at a level that writes one of them: a server that writes neither inherits a pair
// already checked. The problem is reported at the key written at this level, max_delay first.
func (l *loader) checkDelayOrder(path string, own, inherited Retry) {
	if own.BaseDelay == 0 && own.MaxDelay == 0 {
		return
	}
	base := time.Duration(cmp.Or(own.BaseDelay, inherited.BaseDelay, Duration(DefaultRetryBaseDelay)))
	top := time.Duration(cmp.Or(own.MaxDelay, inherited.MaxDelay, Duration(DefaultRetryMaxDelay)))
	if top >= base {
		return
	}
	if own.MaxDelay != 0 {
		l.reportAt(child(path, "max_delay"), "expected at least base_delay (%s%s), got %s",
			fmtDur(base), origin(own.BaseDelay, inherited.BaseDelay, "limits.retry.base_delay"), fmtDur(top))
		return
	}
	l.reportAt(child(path, "base_delay"), "expected at most max_delay (%s%s), got %s; set max_delay as well",
		fmtDur(top), origin(own.MaxDelay, inherited.MaxDelay, "limits.retry.max_delay"), fmtDur(base))
}

// origin says where an effective value came from when it was not written next to the problem.
func origin(own, inherited Duration, inheritedKey string) string {
	switch {
	case own != 0:
		return ""
	case inherited != 0:
		return ", from " + inheritedKey
	}
	return ", the default"
}

// checkBudget checks limits.retry_budget, which exists only gateway-wide.
func (l *loader) checkBudget(path string, x RetryBudget) {
	l.checkNumber(child(path, "ratio"), x.Ratio, budgetRatioRange)
	l.checkNumber(child(path, "min_per_second"), x.MinPerSecond, budgetMinRange)
}

func (l *loader) checkDedup(path string, x Dedup) {
	if w := x.Window; w != nil && (time.Duration(*w) < dedupWindowRange.min || time.Duration(*w) > dedupWindowRange.max) {
		l.reportAt(child(path, "window"), "expected a duration from %s to %s, got %s",
			fmtDur(dedupWindowRange.min), fmtDur(dedupWindowRange.max), fmtDur(time.Duration(*w)))
	}
	l.checkDuration(child(path, "key_window"), x.KeyWindow, dedupKeyWindowRange)
	l.checkCount(child(path, "max_entries"), x.MaxEntries, dedupEntriesRange)
	l.checkBytes(child(path, "max_bytes"), x.MaxBytes, dedupBytesRange)
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
