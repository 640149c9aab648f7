package config

import "time"

// Config is the whole of toolgate.yaml. The zero value is valid: read settings through the accessors in
// defaults.go, which apply the defaults, rather than through the fields.
type Config struct {
	File    string             `yaml:"-"` // absolute path of the loaded file; "" when built in code
	Listen  Listen             `yaml:"listen"`
	Authz   Authz              `yaml:"authz"`
	Auth    Auth               `yaml:"auth"`
	Limits  Limits             `yaml:"limits"` // defaults for every server and tool
	Servers map[string]*Server `yaml:"mcpServers"`
	Pinning Pinning            `yaml:"pinning"` // tool pinning against changed definitions (rug pulls)
	// DescriptionScan is what happens to a tool whose title, description or schema descriptions hide
	// characters (ANSI escapes, zero-width, bidi, tag characters) or instruct the model about other tools:
	// off, strip or quarantine (ScanOff, ScanStrip, ScanQuarantine). A server may override it. Read it
	// through DescriptionScanMode.
	DescriptionScan string     `yaml:"description_scan"`
	Admin           Admin      `yaml:"admin"`       // the admin API listener and its credential
	Approvals       Approvals  `yaml:"approvals"`   // the store of calls that need a human approval
	Audit           Audit      `yaml:"audit"`       // the hash-chained audit trail of every decision
	RateLimits      RateLimits `yaml:"rate_limits"` // token buckets per principal, role and tool
	State           State      `yaml:"state"`       // where state shared by replicas lives; embedded by default
	Console         Console    `yaml:"console"`     // the approvals console on the admin listener (/ui/)
	Redaction       Redaction  `yaml:"redaction"`   // secrets replaced in what upstreams send (config/redaction.go)
	// Credentials is the vault of credentials held per user (auth modes per_user, oauth) and its key.
	Credentials Credentials `yaml:"credentials"`
	// Toolsets are named sets of tools a request may be given, and ToolsetRules pick one per request
	// (toolsets.go).
	Toolsets     map[string]*Toolset `yaml:"toolsets"`
	ToolsetRules []ToolsetRule       `yaml:"toolset_rules"`
	// Connect is the page where users connect upstreams that act as them (auth mode oauth), on the HTTP
	// listener.
	Connect Connect `yaml:"connect"`
}

// Console configures the web console served on the admin listener at /ui/ (console/). It is off while
// Approvers is empty. Read it through ConsoleEnabled, ConsoleApprovers and ConsoleSessionTTL.
type Console struct {
	// Approvers are who may sign in, each with a key of their own (`toolgate keys new --approver <name>`).
	// Which tools each may decide is policy: the approve action of policy.csv, asked with the name.
	Approvers  []Approver `yaml:"approvers"`
	SessionTTL Duration   `yaml:"session_ttl"` // how long a sign-in lasts; 8h by default
	// OIDC, when set, lets approvers sign in with the OpenID Provider (console_oidc.go); an approver
	// without sha256 then signs in there only.
	OIDC *ConsoleOIDC `yaml:"oidc"`
	// PublicURL is the console's address as approvers reach it (through the TLS proxy in front of the
	// admin listener), e.g. https://toolgate-admin.example.com: webhooks link to requests under it.
	PublicURL string `yaml:"public_url"`
}

// Approver is one person who signs in to the console: the name decisions are recorded under (and the
// principal the policy's approve lines are asked about) and the SHA-256 hex of their sign-in key.
type Approver struct {
	Name   string `yaml:"name"`
	SHA256 string `yaml:"sha256"`
}

// State says where the state that several replicas must share lives. Without Redis it stays in this
// process (the embedded default), as for a single gateway. Read it through StateShared, StateRedisURL,
// StateKeyPrefix, StateDialTimeout, StateOpTimeout, RateLimitsFailClosed and DedupFailOpen.
type State struct {
	Redis *Redis `yaml:"redis"` // nil: embedded
	// RateLimitsOnFailure is what a call meets while the store cannot be reached: open (it is not limited)
	// or closed (it is refused with rate_limited); FailOpen, FailClosed.
	RateLimitsOnFailure string `yaml:"rate_limits_on_failure"`
	// DedupOnFailure is what a call of a deduplicated tool meets while the store cannot be reached: closed
	// (the default: it is refused with rate_limited, retryable, since another replica may be running it) or
	// open (it runs, suppressed against identical calls on this replica only).
	DedupOnFailure string `yaml:"dedup_on_failure"`
	// ApprovalsOnFailure can only be closed (the default): a call that needs an approval is refused while the
	// store cannot be reached. Open is refused at load: it would run calls no human approved.
	ApprovalsOnFailure string `yaml:"approvals_on_failure"`
}

// Redis is the shared store. It holds rate-limit buckets, duplicate-suppression markers and recorded
// answers, and approval requests, and carries policy reloads between replicas.
type Redis struct {
	// URL is redis://[user:password@]host[:port][/db], or rediss:// for TLS. It usually carries a
	// password: write it as ${VAR}; messages never quote it.
	URL         string   `yaml:"url"`
	KeyPrefix   string   `yaml:"key_prefix"`   // starts every key and channel, so deployments can share a server
	DialTimeout Duration `yaml:"dial_timeout"` // bound on connecting
	OpTimeout   Duration `yaml:"op_timeout"`   // bound on one operation on a call's path
}

// Audit configures the audit trail (package audit): one hash-chained JSON line per decision. It is on by
// default. Read it through AuditEnabled, AuditPath, AuditFsync, AuditFsyncInterval, AuditMaxBytes,
// AuditMaxFiles, AuditIncludeArgs, AuditRedact and AuditFailClosed.
type Audit struct {
	Disabled      bool     `yaml:"disabled"`       // true: no trail is written
	File          string   `yaml:"file"`           // the trail; absolute after Load (relative to the config file as written)
	Fsync         string   `yaml:"fsync"`          // always, interval or never (AuditFsyncAlways, …)
	FsyncInterval Duration `yaml:"fsync_interval"` // with fsync: interval, the longest a record stays unflushed
	MaxBytes      int64    `yaml:"max_bytes"`      // the file is rotated before it would grow past this
	MaxFiles      int      `yaml:"max_files"`      // rotated files kept besides the current one
	IncludeArgs   bool     `yaml:"include_args"`   // write the arguments (redacted), not only their digest
	// Redact lists argument fields written as "[redacted]": top-level keys ("password") or dotted paths
	// ("card.number"); a path continues through arrays.
	Redact     []string `yaml:"redact"`
	FailClosed bool     `yaml:"fail_closed"` // refuse calls while the trail cannot be written
}

// Admin configures the admin API (approvals; later metrics), served on its own listener with its own
// credential. Read it through AdminAddr and AdminKeySHA256. The API is off while key_sha256 is empty.
type Admin struct {
	Listen    string `yaml:"listen"`     // host:port; loopback by default
	KeySHA256 string `yaml:"key_sha256"` // SHA-256 hex of the admin key; 64 lowercase hex characters after Load
}

// Approvals configures the approvals store; read it through ApprovalsPath and ApprovalTTL.
type Approvals struct {
	File string   `yaml:"file"` // the store file; absolute after Load (relative to the config file as written)
	TTL  Duration `yaml:"ttl"`  // how long pending and approved requests live
	// Rules settle, per held tool, a ttl of its own and the webhooks told of each new request; the
	// first rule whose tools match a held call applies. Which calls are held is the policy's a lines.
	Rules []ApprovalRule `yaml:"rules"`
}

// ApprovalRule is one entry of approvals.rules.
type ApprovalRule struct {
	Tools    []string  `yaml:"tools"`    // <server>/<tool> patterns, * as in the policy's objects
	TTL      Duration  `yaml:"ttl"`      // how long these requests (and their decisions) live; approvals.ttl by default
	Webhooks []Webhook `yaml:"webhooks"` // told of each new request
}

// Webhook is where a new approval request is posted.
type Webhook struct {
	// URL receives the POST. It may come from the environment (${VAR}): a Slack incoming webhook's
	// URL is its credential. It is never quoted in a message or a log (only its host is).
	URL string `yaml:"url"`
	// Secret signs each delivery (HMAC-SHA256, the X-Toolgate-Signature header); written as ${VAR}.
	// Required for format json; optional for slack (Slack does not check it).
	Secret string `yaml:"secret"`
	Format string `yaml:"format"` // json (default) or slack; WebhookJSON, WebhookSlack
	// Egress opens addresses beyond public ones to deliveries, as a server's egress does
	// (docs/configuration.md, "Egress"): a receiver on loopback or the internal network.
	Egress *Egress `yaml:"egress"`
	// Proxy, optional, is the HTTP proxy deliveries go through (http:// or https://; ${VAR} to take
	// HTTPS_PROXY). Without it they connect directly: the proxy environment variables are ignored.
	Proxy string `yaml:"proxy"`
}

// The formats of a webhook's body.
const (
	WebhookJSON  = "json"  // toolgate's own event, signed
	WebhookSlack = "slack" // a Slack incoming-webhook message (text and blocks)
)

// Pinning configures tool pinning: a lock file records a hash of every tool's definition, and a tool
// whose definition later differs is blocked until an admin approves it. Read it through PinningMode and
// PinsPath.
type Pinning struct {
	// Mode is off, tofu (record on first sight) or strict (every new tool needs an approval); PinningOff,
	// PinningTOFU, PinningStrict.
	Mode string `yaml:"mode"`
	File string `yaml:"file"` // the lock file; absolute after Load (relative to the config file as written)
}

// Listen configures the Streamable HTTP endpoint.
type Listen struct {
	HTTP           string   `yaml:"http"`             // host:port; /mcp is served there
	MaxBodyBytes   int64    `yaml:"max_body_bytes"`   // request body cap, bytes
	SessionIdleTTL Duration `yaml:"session_idle_ttl"` // idle MCP sessions are dropped after this
	AllowedOrigins []string `yaml:"allowed_origins"`  // Origins accepted besides loopback ones (DNS-rebinding protection)
	// FastPath answers plain tools/calls without mcp-go's transport layer (see proxy.fastCalls, and proxy.stdioFast for
	// a stdio client); nil means
	// true. false is an escape hatch: every request then goes through mcp-go's handler.
	FastPath *bool `yaml:"fast_path"`
}

// Authz names the Casbin model and policy files. After Load, non-empty values are absolute; use
// Config.ModelPath and Config.PolicyPath, which apply the defaults.
type Authz struct {
	Model  string `yaml:"model"`
	Policy string `yaml:"policy"`
	// RefuseDenyRemoval refuses a policy reload that removes a deny line unless the new policy file
	// carries the one-shot marker (see docs/policy.md, Reloading, checking, explaining). False, the
	// default, applies such a reload, audited and counted.
	RefuseDenyRemoval bool `yaml:"refuse_deny_removal"`
	// ShadowPolicy is a candidate policy file evaluated beside the live one on every call, never
	// deciding (package authz/shadow); "" for none.
	ShadowPolicy string `yaml:"shadow_policy"`
}

// Auth maps credentials to principals.
type Auth struct {
	StdioPrincipal string `yaml:"stdio_principal"` // who the one stdio client is
	// AllowAnonymous, when non-empty, is the principal HTTP requests without any credential act as. Empty
	// (the default) means such requests get 401. A request that presents a bad credential is never
	// downgraded to anonymous.
	AllowAnonymous string `yaml:"allow_anonymous"`
	// Resource is this gateway's resource URI (RFC 8707, RFC 9728), e.g. "https://gw.example.com/mcp":
	// the default JWT audience and the "resource" of the protected-resource metadata. Required with JWT.
	Resource string   `yaml:"resource"`
	APIKeys  []APIKey `yaml:"api_keys"` // HTTP bearer keys
	JWT      *JWT     `yaml:"jwt"`      // nil: JWT bearer tokens are not accepted
}

// APIKey stores only the SHA-256 of a bearer key, so the config file never holds a usable credential.
type APIKey struct {
	Principal string `yaml:"principal"`
	SHA256    string `yaml:"sha256"` // 64 lowercase hex characters after Load
	// Attributes are given to every request made with this key; policy conditions read them as
	// principal.<name>. Names are identifiers ([A-Za-z_][A-Za-z0-9_]*).
	Attributes map[string]string `yaml:"attributes"`
}

// JWT configures JWT bearer tokens from an identity provider, accepted beside API keys. Read the settings
// that have defaults through the Config accessors (JWTAudience, JWKSRefresh, JWTClockSkew,
// JWTPrincipalClaim, JWTAlgorithms).
type JWT struct {
	Issuer   string `yaml:"issuer"`    // required; the iss claim must equal it exactly
	Audience string `yaml:"audience"`  // the aud claim must contain it; default auth.resource
	JWKSURL  string `yaml:"jwks_url"`  // where the signing keys are; exactly one of JWKSURL and JWKSFile
	JWKSFile string `yaml:"jwks_file"` // absolute after Load (relative to the config file as written)
	// JWKSRefresh is how often the key set is fetched (or the file re-read) again.
	JWKSRefresh Duration `yaml:"jwks_refresh"`
	// ClockSkew is the leeway for exp, nbf and iat. A pointer so that an explicit 0s is not the default.
	ClockSkew      *Duration `yaml:"clock_skew"`
	PrincipalClaim string    `yaml:"principal_claim"` // claim naming the principal; default sub
	// RolesClaim names the claim (or dotted path, e.g. realm_access.roles) whose values become Casbin roles
	// for the request; "" means tokens grant no roles.
	RolesClaim      string   `yaml:"roles_claim"`
	AttributeClaims []string `yaml:"attribute_claims"` // claims copied into the subject's attributes
	Algorithms      []string `yaml:"algorithms"`       // accepted alg values; none and HS* are refused at load
}

// Limits are the gateway-wide defaults for calls. The same keys, except retry_budget, appear directly on a
// server to override them; a tool overrides only timeout and max_result_bytes.
type Limits struct {
	Timeout        Duration `yaml:"timeout"`          // deadline of one tools/call
	MaxResultBytes int64    `yaml:"max_result_bytes"` // cap on a call's result
	InitTimeout    Duration `yaml:"init_timeout"`     // bound on initialize + tools/list of an upstream
	MaxInFlight    int      `yaml:"max_in_flight"`    // concurrent calls to one upstream; excess fails fast
	Breaker        Breaker  `yaml:"breaker"`          // the upstream's circuit breaker
	Retry          Retry    `yaml:"retry"`            // retries of retry-safe calls
	// RetryBudget bounds retries across all calls to one upstream. Gateway-wide only: every server gets its
	// own budget with these settings.
	RetryBudget RetryBudget `yaml:"retry_budget"`
	// Dedup configures duplicate suppression. Gateway-wide only.
	Dedup Dedup `yaml:"dedup"`
	// MaxArgumentBytes and MaxArgumentDepth cap a call's arguments, checked before the input schema.
	// Gateway-wide only; read them through MaxArgumentBytes and MaxArgumentDepth.
	MaxArgumentBytes int64 `yaml:"max_argument_bytes"` // size of the arguments object as sent
	MaxArgumentDepth int   `yaml:"max_argument_depth"` // nesting of objects and arrays, the arguments object itself is 1
}

// Dedup configures duplicate suppression of calls to tools that are not retry-safe; read it through
// DedupWindow, DedupKeyWindow, DedupMaxEntries, DedupMaxBytes and DedupIncludeRetrySafe.
type Dedup struct {
	Window           *Duration `yaml:"window"`             // how long a finished call's answer is replayed; 0s: only join calls in flight
	KeyWindow        Duration  `yaml:"key_window"`         // the same for a client idempotency key
	MaxEntries       int       `yaml:"max_entries"`        // finished answers kept at most
	MaxBytes         int64     `yaml:"max_bytes"`          // and their bytes at most
	IncludeRetrySafe bool      `yaml:"include_retry_safe"` // deduplicate retry-safe tools too
}

// Breaker configures one upstream's circuit breaker. Each key falls back on its own, from the server to
// limits to the default; read them through BreakerFailures, BreakerOpenFor and BreakerHalfOpenProbes.
type Breaker struct {
	Failures       int      `yaml:"failures"`         // consecutive transport failures that open the breaker
	OpenFor        Duration `yaml:"open_for"`         // how long it stays open before admitting probes
	HalfOpenProbes int      `yaml:"half_open_probes"` // calls admitted while half-open
}

// Retry configures how a retry-safe call is repeated. Each key falls back on its own, like Breaker; read
// them through RetryMaxAttempts, RetryBaseDelay and RetryMaxDelay.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts"` // attempts of one call, the first included
	BaseDelay   Duration `yaml:"base_delay"`   // backoff before the second attempt (before jitter)
	MaxDelay    Duration `yaml:"max_delay"`    // cap on any one backoff; at least the base delay
}

// RetryBudget bounds retries to one upstream: at most Ratio of recent first attempts, plus MinPerSecond.
// Both are pointers so that an explicit 0 (no ratio, no floor) differs from the default; read them through
// RetryBudgetRatio and RetryBudgetMinPerSecond.
type RetryBudget struct {
	Ratio        *float64 `yaml:"ratio"`          // 0..1
	MinPerSecond *float64 `yaml:"min_per_second"` // 0..1000
}

// Transport is how toolgate talks to an upstream, resolved at load from command/url/type.
type Transport string

// The transports an upstream can use.
const (
	TransportStdio Transport = "stdio" // a child process speaking MCP on stdin/stdout
	TransportHTTP  Transport = "http"  // MCP Streamable HTTP
	TransportSSE   Transport = "sse"   // the older HTTP+SSE transport
)

// Server is one upstream MCP server, keyed by its name under mcpServers.
type Server struct {
	Name      string    `yaml:"-"` // the map key
	Transport Transport `yaml:"-"` // resolved from Command, URL and Type

	// stdio
	Command string            `yaml:"command"` // as written (PATH lookup at spawn) unless it is a relative path with "/"
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"` // added to the child's environment
	Cwd     string            `yaml:"cwd"` // absolute after Load

	// http / sse
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"` // sent upstream; never the client's credential
	// Auth is how toolgate authenticates to this upstream beyond Headers: nil or mode static, the headers
	// only (config/upstreamauth.go).
	Auth *UpstreamAuth `yaml:"auth"`
	// Egress opens addresses the egress guard refuses by default (loopback, private, link-local, ...) to
	// this server's connections and its token endpoint's (config/egress.go); nil: public addresses only.
	Egress *Egress `yaml:"egress"`

	Type     string  `yaml:"type"`   // as written: "", stdio, http, streamable-http, streamableHttp, sse
	Prefix   *string `yaml:"prefix"` // nil means the default; see ToolPrefix
	Disabled bool    `yaml:"disabled"`

	// Overrides of Config.Limits for this server.
	Timeout        Duration `yaml:"timeout"`
	MaxResultBytes int64    `yaml:"max_result_bytes"`
	InitTimeout    Duration `yaml:"init_timeout"`
	MaxInFlight    int      `yaml:"max_in_flight"`
	Breaker        Breaker  `yaml:"breaker"`
	Retry          Retry    `yaml:"retry"`

	// Trusted says the upstream's tool annotations (readOnlyHint, idempotentHint) may be believed: with it,
	// a tool annotated read-only or idempotent is retry-safe unless config says otherwise. Without it,
	// annotations are hints that never enable a retry.
	Trusted bool `yaml:"trusted"`
	// RetrySafe is the operator's statement about every tool of this server: true makes them retry-safe,
	// false makes them not retry-safe whatever their annotations say. nil: not stated. A tool's own
	// retry_safe wins over it; read both through ToolRetrySafe.
	RetrySafe *bool `yaml:"retry_safe"`
	// DescriptionScan overrides the gateway-wide description_scan for this server's tools.
	DescriptionScan string `yaml:"description_scan"`
	// Protocol is the MCP protocol era toolgate speaks to this server: "2025-11-25" (the initialize
	// handshake; the default) or "2026-07-28" (stateless requests, server/discover, multi-round-trip
	// input requests). Read it through UpstreamProtocol.
	Protocol string `yaml:"protocol"`
	// Required makes the gateway report not ready (/readyz) while this server is not connected. Servers
	// are optional by default: one that is down answers upstream_unavailable and the rest serve on.
	Required bool `yaml:"required"`

	Tools map[string]*Tool `yaml:"tools"` // keyed by the upstream's own tool name
}

// Tool overrides limits for one upstream tool, and may reshape it (Override).
type Tool struct {
	Timeout        Duration `yaml:"timeout"`
	MaxResultBytes int64    `yaml:"max_result_bytes"`
	// RetrySafe is the operator's statement about this tool; it wins over the server's retry_safe, so an
	// explicit false exempts one tool from a server-wide true. nil: not stated.
	RetrySafe *bool `yaml:"retry_safe"`
	// Override reshapes what clients see of this tool and fixes some of its arguments (config/overrides.go,
	// docs/configuration.md "Tool overrides"); nil: the tool as its server lists it.
	Override *ToolOverride `yaml:"override"`
}

// Duration is a time.Duration written in YAML as a Go duration string ("8s", "250ms"). Bare numbers are
// rejected because "timeout: 8" does not say whether it means seconds or milliseconds.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }
