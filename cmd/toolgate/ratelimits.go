package main

import (
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/ratelimit"
	ratelimitredis "github.com/toolgate/toolgate/ratelimit/redisstore"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams"
)

// rateLimitsFrom turns config rate_limits into the pipeline's buckets
// (nil when none are configured). Buckets live in the shared store when
// there is one, so a limit holds across replicas; else in this process.
func rateLimitsFrom(cfg *config.Config, store *state.Client) *proxy.RateLimits {
	rl := cfg.RateLimits
	if rl.Principal == nil && len(rl.Roles) == 0 && len(rl.Tools) == 0 {
		return nil
	}
	var limiter ratelimit.Limiter = ratelimit.NewMemory(nil)
	if store != nil {
		limiter = ratelimitredis.New(store)
	}
	return &proxy.RateLimits{
		Limiter:    limiter,
		FailClosed: cfg.RateLimitsFailClosed(),
		ByRole:     len(rl.Roles) > 0,
		Buckets: func(s authz.Subject, roles []string, tool *upstreams.Tool) []ratelimit.Bucket {
			return bucketsFor(rl, s.Principal, roles, tool)
		},
	}
}

// bucketsFor lists the buckets one call takes from. Keys separate scopes
// with a prefix and fields with NUL, which no name contains.
func bucketsFor(rl config.RateLimits, principal string, roles []string, tool *upstreams.Tool) []ratelimit.Bucket {
	var out []ratelimit.Bucket
	add := func(key, scope string, r *config.RateLimit) {
		out = append(out, ratelimit.Bucket{Key: key, Scope: scope, PerSecond: r.PerSecond(), Burst: r.BurstOrDefault()})
	}
	if rl.Principal != nil {
		add("p\x00"+principal, "principal "+principal, rl.Principal)
	}
	for _, role := range roles {
		if r := rl.Roles[role]; r != nil {
			add("r\x00"+role+"\x00"+principal, "role "+role+" for "+principal, r)
		}
	}
	if r := rl.Tools[tool.ID]; r != nil {
		add("t\x00"+tool.ID, "tool "+tool.ID, r)
	}
	if r := rl.Tools[tool.Server+"/*"]; r != nil {
		add("t\x00"+tool.Server+"/*", "server "+tool.Server, r)
	}
	return out
}
