package config

import (
	"math"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// RateLimits are token buckets that calls take from (rate_limits). A call takes one token from every
// bucket that applies to it, all or none; when one is empty the call answers rate_limited (retryable)
// with the wait in its message. Keys are bounded by config (role and tool names) or by callers
// (principals), and idle full buckets are forgotten.
type RateLimits struct {
	// Principal is every principal's own bucket, over all its calls.
	Principal *RateLimit `yaml:"principal"`
	// Roles: for each role named, every principal holding it gets its own bucket of that size.
	Roles map[string]*RateLimit `yaml:"roles"`
	// Tools: one bucket per canonical "<server>/<tool>" (or "<server>/*" for the server's calls), shared
	// by every caller: it protects the upstream.
	Tools map[string]*RateLimit `yaml:"tools"`
}

// RateLimit is one token bucket: Rate tokens per Per, holding at most Burst.
type RateLimit struct {
	Rate  float64  `yaml:"rate"`  // tokens added per Per; > 0
	Per   Duration `yaml:"per"`   // default 1s; 1ms..24h
	Burst int      `yaml:"burst"` // bucket size; default the rate rounded up, at least 1; at most 1,000,000
}

// PerSecond is the bucket's refill rate in tokens per second.
func (r *RateLimit) PerSecond() float64 {
	return r.Rate / time.Duration(r.perOrDefault()).Seconds()
}

func (r *RateLimit) perOrDefault() Duration {
	if r.Per == 0 {
		return Duration(time.Second)
	}
	return r.Per
}

// BurstOrDefault is the bucket size: burst, else the rate per period rounded up (at least 1).
func (r *RateLimit) BurstOrDefault() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.Rate)))
}

func (l *loader) rateLimitsFields(x *RateLimits) fields {
	return fields{
		"principal": func(n ast.Node, p string) { x.Principal = l.rateLimit(n, p) },
		"roles": func(n ast.Node, p string) {
			x.Roles = l.rateLimitMap(n, p, "a mapping of role names to {rate, per, burst}")
		},
		"tools": func(n ast.Node, p string) {
			x.Tools = l.rateLimitMap(n, p, "a mapping of <server>/<tool> to {rate, per, burst}")
		},
	}
}

func (l *loader) rateLimit(n ast.Node, path string) *RateLimit {
	r := &RateLimit{}
	l.object(n, path, fields{
		"rate":  set(&r.Rate, l.number),
		"per":   set(&r.Per, l.duration),
		"burst": set(&r.Burst, l.count),
	})
	return r
}

func (l *loader) rateLimitMap(n ast.Node, path, want string) map[string]*RateLimit {
	es := l.entries(n, path, want)
	out := make(map[string]*RateLimit, len(es))
	for _, e := range es {
		out[e.key] = l.rateLimit(e.val, e.path)
	}
	return out
}

// checkRateLimits validates every bucket, and that tool keys name a configured server.
func (l *loader) checkRateLimits(c *Config) {
	x := &c.RateLimits
	if x.Principal != nil {
		l.checkRateLimit("rate_limits.principal", x.Principal)
	}
	for role, r := range x.Roles {
		p := child("rate_limits.roles", role)
		if strings.TrimSpace(role) == "" {
			l.reportAt(p, "expected a role name, got an empty key")
		}
		l.checkRateLimit(p, r)
	}
	for tool, r := range x.Tools {
		p := child("rate_limits.tools", tool)
		server, name, ok := strings.Cut(tool, "/")
		switch {
		case !ok || server == "" || name == "":
			l.reportAt(p, "expected a canonical tool <server>/<tool> (or <server>/*), got %q", tool)
		case c.Servers[server] == nil:
			l.reportAt(p, "names server %q, which mcpServers does not configure", server)
		}
		l.checkRateLimit(p, r)
	}
}

func (l *loader) checkRateLimit(path string, r *RateLimit) {
	switch {
	case l.bad[path]:
	case !(r.Rate > 0) || math.IsInf(r.Rate, 0):
		l.reportAt(path+".rate", "expected a rate above 0 (tokens per `per`), got %v", r.Rate)
	case r.Per != 0 && (r.Per < Duration(time.Millisecond) || r.Per > Duration(24*time.Hour)):
		l.reportAt(path+".per", "expected a period from 1ms to 24h, got %s", time.Duration(r.Per))
	case r.Burst < 0 || r.Burst > 1_000_000:
		l.reportAt(path+".burst", "expected a burst from 1 to 1000000, got %d", r.Burst)
	}
}
