package config

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/goccy/go-yaml/ast"
)

// The values of state.rate_limits_on_failure and state.dedup_on_failure (state.approvals_on_failure
// takes FailClosed only).
const (
	FailOpen   = "open"   // the feature is skipped while the store cannot be reached
	FailClosed = "closed" // the call is refused while the store cannot be reached
)

var failModes = []string{FailOpen, FailClosed}

// approvalFailModes has no FailOpen: a call that policy holds for a human approval must never run because
// the store that would say whether a human approved it cannot be reached. Running it would make a Redis
// outage an approval bypass, so the key exists only to state the behaviour in the file.
var approvalFailModes = []string{FailClosed}

// maxKeyPrefix bounds state.redis.key_prefix: it is repeated in every key.
const maxKeyPrefix = 64

func (l *loader) stateFields(x *State) fields {
	return fields{
		"redis": func(n ast.Node, p string) {
			x.Redis = &Redis{}
			l.object(n, p, l.redisFields(x.Redis))
		},
		"rate_limits_on_failure": set(&x.RateLimitsOnFailure, l.str),
		"dedup_on_failure":       set(&x.DedupOnFailure, l.str),
		"approvals_on_failure":   set(&x.ApprovalsOnFailure, l.str),
	}
}

func (l *loader) redisFields(x *Redis) fields {
	return fields{
		"url":          set(&x.URL, l.str),
		"key_prefix":   set(&x.KeyPrefix, l.str),
		"dial_timeout": set(&x.DialTimeout, l.duration),
		"op_timeout":   set(&x.OpTimeout, l.duration),
	}
}

// checkState checks state:. A failure mode without state.redis is refused: it would suggest that
// something is shared, and could fail, when every replica keeps its own state.
func (l *loader) checkState(x *State) {
	l.checkOneOf("state.rate_limits_on_failure", x.RateLimitsOnFailure, failModes)
	l.checkOneOf("state.dedup_on_failure", x.DedupOnFailure, failModes)
	if x.ApprovalsOnFailure == FailOpen {
		l.reportAt("state.approvals_on_failure", "expected closed, got \"open\": a call that needs a human approval never runs "+
			"while the approvals store cannot be reached (open would let it run unapproved)")
	} else {
		l.checkOneOf("state.approvals_on_failure", x.ApprovalsOnFailure, approvalFailModes)
	}
	if x.Redis == nil {
		for _, k := range []struct{ key, value, what string }{
			{"rate_limits_on_failure", x.RateLimitsOnFailure, "rate limits are kept in memory"},
			{"dedup_on_failure", x.DedupOnFailure, "duplicate suppression is kept in memory"},
			{"approvals_on_failure", x.ApprovalsOnFailure, "approvals are kept in the approvals file"},
		} {
			if path := "state." + k.key; k.value != "" && !l.bad[path] {
				l.reportAt(path, "applies only with state.redis (without it, %s and cannot fail); remove it or configure state.redis", k.what)
			}
		}
		return
	}
	l.checkRedisURL("state.redis.url", x.Redis.URL)
	l.checkKeyPrefix("state.redis.key_prefix", x.Redis.KeyPrefix)
	l.checkDuration("state.redis.dial_timeout", x.Redis.DialTimeout, redisDialTimeoutRange)
	l.checkDuration("state.redis.op_timeout", x.Redis.OpTimeout, redisOpTimeoutRange)
}

// checkRedisURL accepts redis://[user:password@]host[:port][/db] and rediss:// (TLS). The URL usually
// carries the password (from a variable), so messages quote it redacted or not at all. Query options are
// refused: the timeouts have their own keys, and an option the client would read silently could
// contradict them.
func (l *loader) checkRedisURL(path, raw string) {
	if l.bad[path] {
		return
	}
	if raw == "" {
		l.reportAt(strings.TrimSuffix(path, ".url"), "url is required: the Redis server, such as \"redis://127.0.0.1:6379/0\"")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		l.reportAt(path, "expected a redis:// or rediss:// URL; it does not parse")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		l.reportAt(path, "expected a redis:// or rediss:// URL, got %q", u.Redacted())
	case u.Hostname() == "":
		l.reportAt(path, "expected a URL with a host, got %q", u.Redacted())
	case u.Port() != "" && !validPort(u.Port()):
		l.reportAt(path, "expected a port number from 1 to 65535, got %q", u.Port())
	case !validDB(u.Path):
		l.reportAt(path, "expected a database number as the path (\"/0\"), got %q", u.Path)
	case u.RawQuery != "" || u.Fragment != "":
		l.reportAt(path, "expected no query or fragment; the timeouts are state.redis.dial_timeout and op_timeout")
	}
}

func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// validDB is an empty path, "/", or "/<n>" with n a small database number.
func validDB(path string) bool {
	db := strings.TrimPrefix(path, "/")
	if db == "" {
		return true
	}
	n, err := strconv.ParseUint(db, 10, 16)
	return err == nil && strconv.FormatUint(n, 10) == db
}

// checkKeyPrefix keeps the prefix readable in redis-cli and bounded, since every key repeats it.
func (l *loader) checkKeyPrefix(path, p string) {
	if len(p) > maxKeyPrefix || strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		l.reportAt(path, "expected at most %d characters without spaces or control characters, got %q", maxKeyPrefix, p)
	}
}
