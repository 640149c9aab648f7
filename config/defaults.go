package config

import (
	"cmp"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/breaker"
)

// Defaults. A zero field in Config means "use the default below"; the accessors in this file are the only
// place that applies them. Each accessor passes its candidates to cmp.Or, which returns the first non-zero
// one, so the argument list reads as the precedence order.
const (
	// DefaultHTTPAddr is loopback only, so a fresh install is not reachable from the network.
	DefaultHTTPAddr = "127.0.0.1:8080"
	// DefaultMaxBodyBytes caps an HTTP request body: 4 MiB.
	DefaultMaxBodyBytes int64 = 4 << 20
	// DefaultSessionIdleTTL drops an MCP session nobody has used for 30 minutes.
	DefaultSessionIdleTTL = 30 * time.Minute
	// DefaultStdioPrincipal is who the stdio client is when auth.stdio_principal is empty.
	DefaultStdioPrincipal = "local"
	// DefaultCallTimeout is the deadline of one tools/call: 8 seconds.
	DefaultCallTimeout = 8 * time.Second
	// DefaultMaxResultBytes caps one call's result: 1 MiB.
	DefaultMaxResultBytes int64 = 1 << 20
	// DefaultMaxArgumentBytes caps a call's arguments: 1 MiB. A tool's arguments are what a model writes;
	// a megabyte is far beyond any real call, and each call's arguments are held, checked against the schema,
	// hashed for duplicate suppression and written to the audit trail, so a larger object costs every one
	// of those. It is also well below listen.max_body_bytes (4 MiB), so it is this limit that speaks.
	DefaultMaxArgumentBytes int64 = 1 << 20
	// DefaultMaxArgumentDepth caps how deep a call's arguments nest: 64 levels, the arguments object being
	// the first. Real tool schemas nest a handful of levels; deep nesting only serves to make recursive
	// decoders and schema validators (the gateway's and the upstream's) work or overflow.
	DefaultMaxArgumentDepth = 64
	// DefaultInitTimeout bounds an upstream's initialize + tools/list: 10 seconds.
	DefaultInitTimeout = 10 * time.Second
	// DefaultModelFile and DefaultPolicyFile are looked for beside the config file.
	DefaultModelFile  = "model.conf"
	DefaultPolicyFile = "policy.csv"
	// DefaultJWKSRefresh is how often a JWT key set is fetched (or its file re-read) again: 10 minutes.
	DefaultJWKSRefresh = authn.DefaultJWKSRefresh
	// DefaultJWTClockSkew is the leeway for a token's exp, nbf and iat: 60 seconds.
	DefaultJWTClockSkew = authn.DefaultClockSkew
	// DefaultJWTPrincipalClaim is the claim that names the principal of a JWT: sub.
	DefaultJWTPrincipalClaim = authn.DefaultPrincipalClaim
	// DefaultMaxInFlight is how many calls may be in flight to one upstream at once: 64. One more fails
	// fast with upstream_unavailable instead of queueing.
	DefaultMaxInFlight = 64
	// DefaultBreakerFailures consecutive transport failures (never sent, timed out, broken) open an
	// upstream's breaker: 5.
	DefaultBreakerFailures = breaker.DefaultFailures
	// DefaultBreakerOpenFor is how long an open breaker refuses calls before it admits probes: 30s.
	DefaultBreakerOpenFor = breaker.DefaultOpenFor
	// DefaultBreakerHalfOpenProbes calls are admitted while a breaker is half-open: 1.
	DefaultBreakerHalfOpenProbes = breaker.DefaultHalfOpenProbes
	// DefaultRetryMaxAttempts is the number of attempts of one retry-safe call, the first included: 3.
	DefaultRetryMaxAttempts = breaker.DefaultRetryMaxAttempts
	// DefaultRetryBaseDelay is the backoff before the second attempt, before jitter: 100ms.
	DefaultRetryBaseDelay = breaker.DefaultRetryBaseDelay
	// DefaultRetryMaxDelay caps any one backoff: 2s.
	DefaultRetryMaxDelay = breaker.DefaultRetryMaxDelay
	// DefaultRetryBudgetRatio: retries to one upstream may be at most 20% of its recent first attempts...
	DefaultRetryBudgetRatio = 0.2
	// DefaultRetryBudgetMinPerSecond: ...plus one retry per second, so a quiet upstream can still retry.
	DefaultRetryBudgetMinPerSecond = 1.0
	// DefaultDedupWindow: an identical call within a minute after the first finished gets its answer again.
	DefaultDedupWindow = time.Minute
	// DefaultDedupKeyWindow: a client idempotency key holds for a day.
	DefaultDedupKeyWindow = 24 * time.Hour
	// DefaultDedupMaxEntries bounds the finished answers kept for replay.
	DefaultDedupMaxEntries = 10000
	// DefaultDedupMaxBytes bounds the bytes of those answers: 16 MiB (10,000
	// answers of the default 1 MiB result limit would be 10 GB). It counts in
	// the soft memory limit (cmd/toolgate, limitMemory), so it is kept small:
	// at 64 MiB, 50 callers pulling 5 MiB results peaked at 217 MB, at 16 MiB
	// at 128-138. 10,000 answers of 1.6 KB fill it; an answer over a quarter
	// (a text of ~2 MiB: it counts as text and envelope) is not kept whole.
	DefaultDedupMaxBytes int64 = 16 << 20
	// DefaultPinningMode records each tool's definition on first sight and blocks a later change until an
	// admin approves it.
	DefaultPinningMode = PinningTOFU
	// DefaultPinsFile is the pinning lock file, looked for beside the config file.
	DefaultPinsFile = "toolgate.pins.json"
	// DefaultDescriptionScan removes hidden characters from tool descriptions and flags instruction-like
	// text without blocking the tool.
	DefaultDescriptionScan = ScanStrip
	// DefaultAdminAddr is the admin API listener: loopback only, beside the default MCP port.
	DefaultAdminAddr = "127.0.0.1:8081"
	// DefaultApprovalsFile is the approvals store, looked for beside the config file.
	DefaultApprovalsFile = "toolgate.approvals.json"
	// DefaultApprovalTTL is how long a pending or approved request lives: 1 hour.
	DefaultApprovalTTL = time.Hour
	// DefaultAuditFile is the audit trail, written beside the config file like the pins and approvals.
	DefaultAuditFile = "toolgate.audit.log"
	// DefaultAuditFsync writes every record to the file before the call's answer goes out (so it survives
	// the gateway crashing) and flushes the file to disk at least every fsync_interval (so a power loss
	// costs at most that last second), like Redis's appendfsync everysec. fsync: always closes that last
	// second at the price of one fsync per record on the call's path: measured here about 0.09 ms of
	// latency and 15% of the gateway's CPU per call at concurrency 1 (bench/); choose it where an audit
	// record must be on disk before the caller hears the answer.
	DefaultAuditFsync = AuditFsyncInterval
	// DefaultAuditFsyncInterval is the longest a record stays unflushed with fsync: interval: 1 second.
	DefaultAuditFsyncInterval = time.Second
	// DefaultAuditMaxBytes rotates the trail at 100 MiB.
	DefaultAuditMaxBytes int64 = 100 << 20
	// DefaultAuditMaxFiles keeps 10 rotated files besides the current one: with the default size, at most
	// about 1.1 GiB of trail.
	DefaultAuditMaxFiles = 10
	// DefaultStateKeyPrefix starts every Redis key and channel toolgate uses.
	DefaultStateKeyPrefix = "toolgate:"
	// DefaultStateDialTimeout bounds connecting to Redis: 1 second.
	DefaultStateDialTimeout = time.Second
	// DefaultStateOpTimeout bounds one Redis operation on a call's path: 200 milliseconds. A same-network
	// Redis answers in well under a millisecond, so this is only reached when it is in trouble, and then
	// the call should meet the configured failure behaviour rather than wait.
	DefaultStateOpTimeout = 200 * time.Millisecond
	// DefaultRateLimitsOnFailure lets calls through unlimited while the store cannot be reached: a rate
	// limit protects capacity, and refusing every call would turn a Redis outage into a gateway outage.
	DefaultRateLimitsOnFailure = FailOpen
	// DefaultDedupOnFailure refuses calls of deduplicated tools while the store cannot be reached: another
	// replica may be running the identical call, and those tools are the ones that must not run twice.
	DefaultDedupOnFailure = FailClosed
)

// DefaultJWTAlgorithms are the signature algorithms accepted when auth.jwt.algorithms is empty: RS256,
// ES256, EdDSA. It returns a new slice each time, so callers may keep or change it.
func DefaultJWTAlgorithms() []string { return authn.DefaultAlgorithms() }

// Allowed ranges, inclusive, checked at load. Zero is never range-checked: it means the default.
var (
	maxBodyRange     = byteRange{min: 1 << 10, max: 64 << 20}                      // listen.max_body_bytes
	sessionIdleRange = durRange{min: time.Minute, max: 24 * time.Hour}             // listen.session_idle_ttl
	timeoutRange     = durRange{min: 10 * time.Millisecond, max: 10 * time.Minute} // timeout
	maxResultRange   = byteRange{min: 1 << 10, max: 64 << 20}                      // max_result_bytes
	initTimeoutRange = durRange{min: 100 * time.Millisecond, max: 5 * time.Minute} // init_timeout
	jwksRefreshRange = durRange{min: time.Minute, max: 24 * time.Hour}             // auth.jwt.jwks_refresh
	clockSkewRange   = durRange{min: 0, max: 5 * time.Minute}                      // auth.jwt.clock_skew (0 is allowed)

	maxInFlightRange    = countRange{min: 1, max: 10000}                         // max_in_flight
	maxArgumentRange    = byteRange{min: 1 << 10, max: 64 << 20}                 // limits.max_argument_bytes
	argumentDepthRange  = countRange{min: 1, max: 1000}                          // limits.max_argument_depth
	failuresRange       = countRange{min: 1, max: 1000}                          // breaker.failures
	openForRange        = durRange{min: time.Second, max: time.Hour}             // breaker.open_for
	halfOpenProbesRange = countRange{min: 1, max: 100}                           // breaker.half_open_probes
	maxAttemptsRange    = countRange{min: 1, max: 10}                            // retry.max_attempts
	baseDelayRange      = durRange{min: time.Millisecond, max: 10 * time.Second} // retry.base_delay
	maxDelayRange       = durRange{min: time.Millisecond, max: time.Minute}      // retry.max_delay, also >= base_delay
	budgetRatioRange    = numRange{min: 0, max: 1}                               // limits.retry_budget.ratio (0 is allowed)
	budgetMinRange      = numRange{min: 0, max: 1000}                            // limits.retry_budget.min_per_second (0 is allowed)
	dedupWindowRange    = durRange{min: 0, max: 24 * time.Hour}                  // limits.dedup.window (0 is allowed)
	dedupKeyWindowRange = durRange{min: time.Minute, max: 30 * 24 * time.Hour}   // limits.dedup.key_window
	dedupEntriesRange   = countRange{min: 1, max: 1000000}                       // limits.dedup.max_entries
	dedupBytesRange     = byteRange{min: 1 << 20, max: 16 << 30}                 // limits.dedup.max_bytes
	approvalTTLRange    = durRange{min: time.Minute, max: 30 * 24 * time.Hour}   // approvals.ttl

	auditFsyncIntervalRange = durRange{min: 10 * time.Millisecond, max: time.Minute} // audit.fsync_interval
	auditMaxBytesRange      = byteRange{min: 1 << 20, max: 16 << 30}                 // audit.max_bytes
	auditMaxFilesRange      = countRange{min: 1, max: 1000}                          // audit.max_files

	redisDialTimeoutRange = durRange{min: 10 * time.Millisecond, max: time.Minute} // state.redis.dial_timeout
	redisOpTimeoutRange   = durRange{min: time.Millisecond, max: 10 * time.Second} // state.redis.op_timeout
)

// HTTPAddr is the host:port of the Streamable HTTP listener. Default DefaultHTTPAddr.
func (c *Config) HTTPAddr() string {
	return cmp.Or(c.Listen.HTTP, DefaultHTTPAddr)
}

// HTTPLoopback reports whether the HTTP listener is bound to a loopback address only (localhost or a
// loopback IP), so that it cannot be reached from the network.
func (c *Config) HTTPLoopback() bool {
	host, _, err := net.SplitHostPort(c.HTTPAddr())
	return err == nil && isLoopbackHost(host)
}

// MaxBodyBytes is the largest HTTP request body accepted, in bytes. Default 4 MiB.
func (c *Config) MaxBodyBytes() int64 {
	return cmp.Or(c.Listen.MaxBodyBytes, DefaultMaxBodyBytes)
}

// SessionIdleTTL is how long an unused MCP session lives. Default 30m.
func (c *Config) SessionIdleTTL() time.Duration {
	return time.Duration(cmp.Or(c.Listen.SessionIdleTTL, Duration(DefaultSessionIdleTTL)))
}

// StdioPrincipal is the principal of the stdio client. Default "local".
func (c *Config) StdioPrincipal() string {
	return cmp.Or(c.Auth.StdioPrincipal, DefaultStdioPrincipal)
}

// JWTAudience is the value a JWT's aud claim must contain: auth.jwt.audience, else auth.resource.
func (c *Config) JWTAudience() string {
	return cmp.Or(c.jwt().Audience, c.Auth.Resource)
}

// JWKSRefresh is how often the JWT key set is refreshed. Default 10m.
func (c *Config) JWKSRefresh() time.Duration {
	return time.Duration(cmp.Or(c.jwt().JWKSRefresh, Duration(DefaultJWKSRefresh)))
}

// JWTClockSkew is the leeway for exp, nbf and iat. Default 60s; an explicit 0s means none.
func (c *Config) JWTClockSkew() time.Duration {
	if s := c.jwt().ClockSkew; s != nil {
		return time.Duration(*s)
	}
	return DefaultJWTClockSkew
}

// JWTPrincipalClaim is the claim that names a token's principal. Default sub.
func (c *Config) JWTPrincipalClaim() string {
	return cmp.Or(c.jwt().PrincipalClaim, DefaultJWTPrincipalClaim)
}

// JWTAlgorithms are the accepted signature algorithms, as a new slice. Default RS256, ES256, EdDSA.
func (c *Config) JWTAlgorithms() []string {
	if algs := c.jwt().Algorithms; len(algs) > 0 {
		return slices.Clone(algs)
	}
	return DefaultJWTAlgorithms()
}

// jwt is auth.jwt, or its zero value when JWT is not configured, so the accessors need no nil checks.
func (c *Config) jwt() *JWT {
	if c.Auth.JWT == nil {
		return &JWT{}
	}
	return c.Auth.JWT
}

// CallTimeout is the deadline of one call to tool on server: the tool's override, else the server's, else
// limits.timeout, else 8s. Unknown server or tool names get the gateway-wide value.
func (c *Config) CallTimeout(server, tool string) time.Duration {
	s, t := c.overrides(server, tool)
	return time.Duration(cmp.Or(t.Timeout, s.Timeout, c.Limits.Timeout, Duration(DefaultCallTimeout)))
}

// MaxResultBytes caps the result of one call to tool on server, in bytes, with the same precedence as
// CallTimeout. Default 1 MiB.
func (c *Config) MaxResultBytes(server, tool string) int64 {
	s, t := c.overrides(server, tool)
	return cmp.Or(t.MaxResultBytes, s.MaxResultBytes, c.Limits.MaxResultBytes, DefaultMaxResultBytes)
}

// MaxArgumentBytes caps the arguments of a call, in bytes: limits.max_argument_bytes, else 1 MiB.
// Gateway-wide only.
func (c *Config) MaxArgumentBytes() int64 {
	return cmp.Or(c.Limits.MaxArgumentBytes, DefaultMaxArgumentBytes)
}

// MaxArgumentDepth caps how deep the arguments of a call nest (the arguments object is level 1):
// limits.max_argument_depth, else 64. Gateway-wide only.
func (c *Config) MaxArgumentDepth() int {
	return cmp.Or(c.Limits.MaxArgumentDepth, DefaultMaxArgumentDepth)
}

// InitTimeout bounds initialize + tools/list of server: its override, else limits.init_timeout, else 10s.
func (c *Config) InitTimeout(server string) time.Duration {
	s, _ := c.overrides(server, "")
	return time.Duration(cmp.Or(s.InitTimeout, c.Limits.InitTimeout, Duration(DefaultInitTimeout)))
}

// MaxInFlight is how many calls to server may be in flight at once: its max_in_flight, else
// limits.max_in_flight, else 64. Unknown server names get the gateway-wide value, as for every accessor
// below.
func (c *Config) MaxInFlight(server string) int {
	s, _ := c.overrides(server, "")
	return cmp.Or(s.MaxInFlight, c.Limits.MaxInFlight, DefaultMaxInFlight)
}

// BreakerFailures is how many consecutive transport failures open server's breaker: its
// breaker.failures, else limits.breaker.failures, else 5.
func (c *Config) BreakerFailures(server string) uint32 {
	s, _ := c.overrides(server, "")
	return uint32(cmp.Or(s.Breaker.Failures, c.Limits.Breaker.Failures, DefaultBreakerFailures))
}

// BreakerOpenFor is how long server's breaker stays open before it admits probes, with the same
// precedence as BreakerFailures. Default 30s.
func (c *Config) BreakerOpenFor(server string) time.Duration {
	s, _ := c.overrides(server, "")
	return time.Duration(cmp.Or(s.Breaker.OpenFor, c.Limits.Breaker.OpenFor, Duration(DefaultBreakerOpenFor)))
}

// BreakerHalfOpenProbes is how many calls server's half-open breaker admits, with the same precedence as
// BreakerFailures. Default 1.
func (c *Config) BreakerHalfOpenProbes(server string) uint32 {
	s, _ := c.overrides(server, "")
	return uint32(cmp.Or(s.Breaker.HalfOpenProbes, c.Limits.Breaker.HalfOpenProbes, DefaultBreakerHalfOpenProbes))
}

// RetryMaxAttempts is how many attempts one retry-safe call to server may take, the first included: its
// retry.max_attempts, else limits.retry.max_attempts, else 3.
func (c *Config) RetryMaxAttempts(server string) int {
	s, _ := c.overrides(server, "")
	return cmp.Or(s.Retry.MaxAttempts, c.Limits.Retry.MaxAttempts, DefaultRetryMaxAttempts)
}

// RetryBaseDelay is the backoff before the second attempt to server, before jitter, with the same
// precedence as RetryMaxAttempts. Default 100ms.
func (c *Config) RetryBaseDelay(server string) time.Duration {
	s, _ := c.overrides(server, "")
	return time.Duration(cmp.Or(s.Retry.BaseDelay, c.Limits.Retry.BaseDelay, Duration(DefaultRetryBaseDelay)))
}

// RetryMaxDelay caps any one backoff before an attempt to server, with the same precedence as
// RetryMaxAttempts. Default 2s. Load guarantees RetryMaxDelay(s) >= RetryBaseDelay(s).
func (c *Config) RetryMaxDelay(server string) time.Duration {
	s, _ := c.overrides(server, "")
	return time.Duration(cmp.Or(s.Retry.MaxDelay, c.Limits.Retry.MaxDelay, Duration(DefaultRetryMaxDelay)))
}

// RetryBudgetRatio is the share of recent first attempts to one upstream that may be retried:
// limits.retry_budget.ratio, else 0.2. An explicit 0 leaves only RetryBudgetMinPerSecond.
func (c *Config) RetryBudgetRatio() float64 {
	if r := c.Limits.RetryBudget.Ratio; r != nil {
		return *r
	}
	return DefaultRetryBudgetRatio
}

// RetryBudgetMinPerSecond is the retries per second to one upstream allowed whatever the ratio:
// limits.retry_budget.min_per_second, else 1. An explicit 0 means none beyond the ratio.
func (c *Config) RetryBudgetMinPerSecond() float64 {
	if m := c.Limits.RetryBudget.MinPerSecond; m != nil {
		return *m
	}
	return DefaultRetryBudgetMinPerSecond
}

// Trusted reports whether server's tool annotations may make a tool retry-safe (trusted: true). Default
// false; unknown servers are not trusted.
func (c *Config) Trusted(server string) bool {
	s := c.Servers[server]
	return s != nil && s.Trusted
}

// ToolRetrySafe is what the operator said about retrying tool on server: the tool's retry_safe, else the
// server's. explicit is false when neither says anything; then safe is false and the tool's annotations
// decide, if the server is trusted (see breaker.RetrySafe).
func (c *Config) ToolRetrySafe(server, tool string) (safe, explicit bool) {
	s := c.Servers[server]
	if s == nil {
		return false, false
	}
	if t := s.Tools[tool]; t != nil && t.RetrySafe != nil {
		return *t.RetrySafe, true
	}
	if s.RetrySafe != nil {
		return *s.RetrySafe, true
	}
	return false, false
}

// ModelPath is the Casbin model file: authz.model, else model.conf beside the config file.
func (c *Config) ModelPath() string {
	return cmp.Or(c.Authz.Model, filepath.Join(c.Dir(), DefaultModelFile))
}

// PolicyPath is the Casbin policy file: authz.policy, else policy.csv beside the config file.
func (c *Config) PolicyPath() string {
	return cmp.Or(c.Authz.Policy, filepath.Join(c.Dir(), DefaultPolicyFile))
}

// PinningMode is pinning.mode: off, tofu or strict. Default tofu.
func (c *Config) PinningMode() string {
	return cmp.Or(c.Pinning.Mode, DefaultPinningMode)
}

// PinsPath is the pinning lock file: pinning.file, else toolgate.pins.json beside the config file.
func (c *Config) PinsPath() string {
	return cmp.Or(c.Pinning.File, filepath.Join(c.Dir(), DefaultPinsFile))
}

// RequiredServers are the enabled servers marked required, in order: /readyz fails while any of them
// is not connected.
func (c *Config) RequiredServers() []string {
	var out []string
	for _, name := range c.ServerNames() {
		if s := c.Servers[name]; s.Required && !s.Disabled {
			out = append(out, name)
		}
	}
	return out
}

// UpstreamProtocols are the protocol versions toolgate can speak to an upstream, the default first.
var UpstreamProtocols = []string{"2025-11-25", "2026-07-28"}

// UpstreamProtocol is the protocol version toolgate speaks to server: its protocol, else 2025-11-25
// (the initialize handshake, which every server released before 2026 understands).
func (c *Config) UpstreamProtocol(server string) string {
	if s := c.Servers[server]; s != nil && s.Protocol != "" {
		return s.Protocol
	}
	return UpstreamProtocols[0]
}

// DescriptionScanMode is what happens to server's tools when their descriptions hide characters or instruct
// the model: the server's description_scan, else the gateway-wide one, else strip. Unknown server names
// get the gateway-wide value.
func (c *Config) DescriptionScanMode(server string) string {
	var own string
	if s := c.Servers[server]; s != nil {
		own = s.DescriptionScan
	}
	return cmp.Or(own, c.DescriptionScan, DefaultDescriptionScan)
}

// Dir is the directory relative paths in the config are resolved against: the config file's directory,
// or "." for a Config built in code.
func (c *Config) Dir() string {
	if c.File == "" {
		return "."
	}
	return filepath.Dir(c.File)
}

// ToolPrefix is prepended to the server's tool names to form client-facing names: "<name>__" unless
// prefix is set, in which case it is used verbatim ("" exposes the tools unprefixed).
func (s *Server) ToolPrefix() string {
	if s.Prefix == nil {
		return s.Name + "__"
	}
	return *s.Prefix
}

// ServerNames lists every configured server, disabled ones included, sorted.
func (c *Config) ServerNames() []string {
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// overrides returns the per-server limits and per-tool overrides that apply to a call, as zero values when
// the server or tool has none, so the accessors above can fall through without nil checks.
func (c *Config) overrides(server, tool string) (Limits, Tool) {
	s := c.Servers[server]
	if s == nil {
		return Limits{}, Tool{}
	}
	if t := s.Tools[tool]; t != nil {
		return s.limits(), *t
	}
	return s.limits(), Tool{}
}

// limits is the server's overrides of Config.Limits, in the shape of Limits.
func (s *Server) limits() Limits {
	return Limits{
		Timeout:        s.Timeout,
		MaxResultBytes: s.MaxResultBytes,
		InitTimeout:    s.InitTimeout,
		MaxInFlight:    s.MaxInFlight,
		Breaker:        s.Breaker,
		Retry:          s.Retry,
	}
}

// DedupWindow is how long a finished call's answer is replayed for an identical call: limits.dedup.window,
// else 1m. An explicit 0s keeps joining calls in flight but replays nothing.
func (c *Config) DedupWindow() time.Duration {
	if w := c.Limits.Dedup.Window; w != nil {
		return time.Duration(*w)
	}
	return DefaultDedupWindow
}

// DedupKeyWindow is how long a client idempotency key holds: limits.dedup.key_window, else 24h.
func (c *Config) DedupKeyWindow() time.Duration {
	return cmp.Or(time.Duration(c.Limits.Dedup.KeyWindow), DefaultDedupKeyWindow)
}

// DedupMaxEntries bounds the finished answers kept: limits.dedup.max_entries, else 10000.
func (c *Config) DedupMaxEntries() int {
	return cmp.Or(c.Limits.Dedup.MaxEntries, DefaultDedupMaxEntries)
}

// DedupMaxBytes bounds the bytes of the finished answers kept: limits.dedup.max_bytes, else 16 MiB.
func (c *Config) DedupMaxBytes() int64 {
	return cmp.Or(c.Limits.Dedup.MaxBytes, DefaultDedupMaxBytes)
}

// DedupIncludeRetrySafe says whether retry-safe tools are deduplicated too (default false: repeating
// them is harmless by definition).
func (c *Config) DedupIncludeRetrySafe() bool { return c.Limits.Dedup.IncludeRetrySafe }

// AdminAddr is the host:port of the admin API listener: admin.listen, else 127.0.0.1:8081.
func (c *Config) AdminAddr() string {
	return cmp.Or(c.Admin.Listen, DefaultAdminAddr)
}

// AdminKeySHA256 is the SHA-256 hex of the admin key, lowercase; "" (the default) means the admin API is
// disabled.
func (c *Config) AdminKeySHA256() string { return c.Admin.KeySHA256 }

// ApprovalsPath is the approvals store: approvals.file, else toolgate.approvals.json beside the config file.
func (c *Config) ApprovalsPath() string {
	return cmp.Or(c.Approvals.File, filepath.Join(c.Dir(), DefaultApprovalsFile))
}

// ApprovalTTL is how long a pending or approved request lives: approvals.ttl, else 1h.
func (c *Config) ApprovalTTL() time.Duration {
	return time.Duration(cmp.Or(c.Approvals.TTL, Duration(DefaultApprovalTTL)))
}

// AuditEnabled reports whether the audit trail is written: true unless audit.disabled.
func (c *Config) AuditEnabled() bool { return !c.Audit.Disabled }

// AuditPath is the audit trail: audit.file, else toolgate.audit.log beside the config file. Rotated files
// are <path>.1 (the newest) to <path>.<AuditMaxFiles>.
func (c *Config) AuditPath() string {
	return cmp.Or(c.Audit.File, filepath.Join(c.Dir(), DefaultAuditFile))
}

// AuditFsync is when audit records are flushed to disk: always, interval or never. Default interval.
func (c *Config) AuditFsync() string {
	return cmp.Or(c.Audit.Fsync, DefaultAuditFsync)
}

// AuditFsyncInterval is, with fsync: interval, the longest a record stays unflushed: audit.fsync_interval,
// else 1s.
func (c *Config) AuditFsyncInterval() time.Duration {
	return time.Duration(cmp.Or(c.Audit.FsyncInterval, Duration(DefaultAuditFsyncInterval)))
}

// AuditMaxBytes is the size, in bytes, the trail is rotated before it would pass: audit.max_bytes, else
// 100 MiB.
func (c *Config) AuditMaxBytes() int64 {
	return cmp.Or(c.Audit.MaxBytes, DefaultAuditMaxBytes)
}

// AuditMaxFiles is how many rotated files are kept besides the current one; older ones are deleted:
// audit.max_files, else 10.
func (c *Config) AuditMaxFiles() int {
	return cmp.Or(c.Audit.MaxFiles, DefaultAuditMaxFiles)
}

// AuditIncludeArgs reports whether records carry the call's arguments (with AuditRedact applied) and not
// only their digest. Default false: arguments can hold personal data and secrets, and the digest is
// enough to match a record with an approval or a known call.
func (c *Config) AuditIncludeArgs() bool { return c.Audit.IncludeArgs }

// AuditRedact is the argument fields written as "[redacted]", as a new slice; empty by default.
func (c *Config) AuditRedact() []string { return slices.Clone(c.Audit.Redact) }

// AuditFailClosed reports whether calls are refused while the trail cannot be written. Default false:
// a full disk is reported (error, metric, readiness) but does not take every tool offline unless the
// operator chose that.
func (c *Config) AuditFailClosed() bool { return c.Audit.FailClosed }

// StateShared reports whether state.redis is configured: replicas share rate limits and policy reloads
// through it. False (the default) keeps everything in this process.
func (c *Config) StateShared() bool { return c.State.Redis != nil }

// StateRedisURL is state.redis.url (it may hold a password: never log it); "" when not shared.
func (c *Config) StateRedisURL() string {
	if c.State.Redis == nil {
		return ""
	}
	return c.State.Redis.URL
}

// StateKeyPrefix starts every Redis key and channel: state.redis.key_prefix, else "toolgate:".
func (c *Config) StateKeyPrefix() string {
	return cmp.Or(c.redis().KeyPrefix, DefaultStateKeyPrefix)
}

// StateDialTimeout bounds connecting to Redis: state.redis.dial_timeout, else 1s.
func (c *Config) StateDialTimeout() time.Duration {
	return time.Duration(cmp.Or(c.redis().DialTimeout, Duration(DefaultStateDialTimeout)))
}

// StateOpTimeout bounds one Redis operation: state.redis.op_timeout, else 200ms.
func (c *Config) StateOpTimeout() time.Duration {
	return time.Duration(cmp.Or(c.redis().OpTimeout, Duration(DefaultStateOpTimeout)))
}

// RateLimitsFailClosed reports whether calls are refused (rate_limited) while the shared store cannot be
// reached: state.rate_limits_on_failure is closed. Default open: calls go on unlimited.
func (c *Config) RateLimitsFailClosed() bool {
	return cmp.Or(c.State.RateLimitsOnFailure, DefaultRateLimitsOnFailure) == FailClosed
}

// DedupFailOpen reports whether calls of deduplicated tools run (suppressed on this replica only) while the
// shared store cannot be reached: state.dedup_on_failure is open. Default closed: they are refused with
// rate_limited, retryable. (Approvals always fail closed; see State.ApprovalsOnFailure.)
func (c *Config) DedupFailOpen() bool {
	return cmp.Or(c.State.DedupOnFailure, DefaultDedupOnFailure) == FailOpen
}

// redis is state.redis, or an empty one so the accessors can apply defaults.
func (c *Config) redis() *Redis {
	if c.State.Redis == nil {
		return &Redis{}
	}
	return c.State.Redis
}

// HTTPFastPath reports whether plain tools/calls over Streamable HTTP skip mcp-go's transport layer:
// listen.fast_path, true unless set to false.
func (c *Config) HTTPFastPath() bool { return c.Listen.FastPath == nil || *c.Listen.FastPath }
