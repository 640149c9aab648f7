package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/webhook"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/dedup"
	dedupredis "github.com/toolgate/toolgate/dedup/redisstore"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/ratelimit"
	ratelimitredis "github.com/toolgate/toolgate/ratelimit/redisstore"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/toolsets"
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/egress"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

// Every package takes its own options, not the whole config: this file is
// where the config is turned into them, defaults applied by the config's
// accessors.

// breakerSettingsFrom is the breaker settings of every configured server
// (disabled ones included), ready for breaker.NewSet. A nil cfg means the
// zero Config: no servers.
func breakerSettingsFrom(cfg *config.Config) map[string]breaker.Settings {
	if cfg == nil {
		return map[string]breaker.Settings{}
	}
	out := make(map[string]breaker.Settings, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = breaker.Settings{
			Failures:       cfg.BreakerFailures(name),
			OpenFor:        cfg.BreakerOpenFor(name),
			HalfOpenProbes: cfg.BreakerHalfOpenProbes(name),
		}
	}
	return out
}

// retryFrom is the retry settings of server. An unknown server gets the
// gateway-wide settings; a nil cfg, the defaults.
func retryFrom(cfg *config.Config, server string) breaker.RetrySettings {
	if cfg == nil {
		cfg = &config.Config{}
	}
	return breaker.RetrySettings{
		MaxAttempts: cfg.RetryMaxAttempts(server),
		BaseDelay:   cfg.RetryBaseDelay(server),
		MaxDelay:    cfg.RetryMaxDelay(server),
	}
}

// budgetsFrom is one retry budget per configured server
// (limits.retry_budget applies to each server on its own), on the clock
// now (nil means time.Now). A nil cfg means no servers.
func budgetsFrom(cfg *config.Config, now func() time.Time) map[string]*breaker.Budget {
	if cfg == nil {
		return map[string]*breaker.Budget{}
	}
	out := make(map[string]*breaker.Budget, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		out[name] = breaker.NewBudget(cfg.RetryBudgetRatio(), cfg.RetryBudgetMinPerSecond(), now)
	}
	return out
}

// retrySafe says whether a tool may be repeated after an unknown outcome:
// the operator's word in config, else what a trusted server's annotations
// say (docs/design.md, "Failure semantics").
func retrySafe(cfg *config.Config) func(*upstreams.Tool) bool {
	return func(t *upstreams.Tool) bool {
		safe, explicit := cfg.ToolRetrySafe(t.Server, t.Upstream)
		return breaker.RetrySafe(explicit, safe, cfg.Trusted(t.Server), t.Annotations.ReadOnlyHint, t.Annotations.IdempotentHint)
	}
}

// argumentLimits are the gateway-wide caps on a call's arguments
// (limits.max_argument_bytes, limits.max_argument_depth), defaults applied.
func argumentLimits(cfg *config.Config) pipeline.ArgumentLimits {
	return pipeline.ArgumentLimits{MaxBytes: cfg.MaxArgumentBytes(), MaxDepth: cfg.MaxArgumentDepth()}
}

// resilienceFrom builds the per-upstream breakers, retry settings and
// budgets, and in-flight limits from config (docs/design.md, "Failure
// semantics").
func resilienceFrom(cfg *config.Config, breakers *breaker.Set) pipeline.Resilience {
	r := pipeline.Resilience{
		Breakers: breakers,
		Budgets:  budgetsFrom(cfg, time.Now),
		Retry:    map[string]breaker.RetrySettings{},
		InFlight: map[string]*pipeline.Limiter{},
	}
	for _, server := range cfg.ServerNames() {
		r.Retry[server] = retryFrom(cfg, server)
		r.InFlight[server] = pipeline.NewLimiter(cfg.MaxInFlight(server))
	}
	return r
}

// dedupFrom builds duplicate suppression (limits.dedup): in this process,
// and across replicas too when there is a shared store (state.redis).
func dedupFrom(cfg *config.Config, store *state.Client, m *metrics.Metrics, log *slog.Logger) *dedup.Guard {
	o := dedup.Options{
		MaxEntries:   cfg.DedupMaxEntries(),
		MaxBytes:     cfg.DedupMaxBytes(),
		Window:       cfg.DedupWindow(),
		KeyWindow:    cfg.DedupKeyWindow(),
		RetrySafeToo: cfg.DedupIncludeRetrySafe(),
		Metrics:      m,
		Log:          log,
	}
	if store != nil {
		o.Shared, o.SharedFailOpen = dedupredis.New(store), cfg.DedupFailOpen()
	}
	return dedup.NewGuard(o)
}

// rateLimitsFrom turns config rate_limits into the rate-limit guard (nil
// when none are configured). Buckets live in the shared store when there
// is one, so a limit holds across replicas; else in this process.
func rateLimitsFrom(cfg *config.Config, store *state.Client, log *slog.Logger) *ratelimit.Guard {
	limits := limitsFrom(cfg.RateLimits)
	if limits.Empty() {
		return nil
	}
	var limiter ratelimit.Limiter = ratelimit.NewMemory(nil)
	if store != nil {
		limiter = ratelimitredis.New(store)
	}
	return &ratelimit.Guard{Limiter: limiter, Limits: limits, FailClosed: cfg.RateLimitsFailClosed(), Log: log}
}

// limitsFrom converts config rate_limits into the guard's own terms.
func limitsFrom(rl config.RateLimits) ratelimit.Limits {
	rate := func(r *config.RateLimit) ratelimit.Rate {
		return ratelimit.Rate{PerSecond: r.PerSecond(), Burst: r.BurstOrDefault()}
	}
	var l ratelimit.Limits
	if rl.Principal != nil {
		r := rate(rl.Principal)
		l.Principal = &r
	}
	if len(rl.Roles) > 0 {
		l.Roles = map[string]ratelimit.Rate{}
		for role, r := range rl.Roles {
			l.Roles[role] = rate(r)
		}
	}
	if len(rl.Tools) > 0 {
		l.Tools = map[string]ratelimit.Rate{}
		for tool, r := range rl.Tools {
			l.Tools[tool] = rate(r)
		}
	}
	return l
}

// AuthnOptions is the auth section of cfg in authn's terms: API keys, the
// anonymous principal, the resource, and JWT, with the defaults applied by
// the config's accessors. An explicit clock_skew: 0s becomes
// authn.NoClockSkew, since a zero ClockSkew means authn's default.
func AuthnOptions(cfg *config.Config) authn.Options {
	a := cfg.Auth
	o := authn.Options{Resource: a.Resource, AllowAnonymous: a.AllowAnonymous}
	if len(a.APIKeys) > 0 {
		o.APIKeys = make([]authn.APIKey, len(a.APIKeys))
		for i, k := range a.APIKeys {
			o.APIKeys[i] = authn.APIKey{Principal: k.Principal, SHA256: k.SHA256, Attributes: k.Attributes}
		}
	}
	if j := a.JWT; j != nil {
		skew := cfg.JWTClockSkew()
		if skew == 0 {
			skew = authn.NoClockSkew
		}
		o.JWT = &authn.JWTOptions{
			Issuer:          j.Issuer,
			Audience:        cfg.JWTAudience(),
			JWKSURL:         j.JWKSURL,
			JWKSFile:        j.JWKSFile, // absolute: config resolved it against the config file's directory
			Refresh:         cfg.JWKSRefresh(),
			ClockSkew:       skew,
			PrincipalClaim:  cfg.JWTPrincipalClaim(),
			RolesClaim:      j.RolesClaim,
			AttributeClaims: j.AttributeClaims,
			Algorithms:      cfg.JWTAlgorithms(),
		}
	}
	return o
}

// PolicyOptions tells the policy loader what config knows: the servers
// objects may name, and the principals credentials map to (so a principal
// with permission lines of its own is not mistaken for a role).
func PolicyOptions(cfg *config.Config) authz.Options {
	principals := []string{cfg.StdioPrincipal()}
	if cfg.Auth.AllowAnonymous != "" {
		principals = append(principals, cfg.Auth.AllowAnonymous)
	}
	for _, k := range cfg.Auth.APIKeys {
		principals = append(principals, k.Principal)
	}
	// The console's approvers are asked about as principals (the approve action), so a name
	// that only an approve line mentions is an approver, not a role.
	for _, a := range cfg.ConsoleApprovers() {
		principals = append(principals, a.Name)
	}
	return authz.Options{Servers: cfg.ServerNames(), Principals: principals}
}

// ApprovalRules are approvals.rules as the approval guard applies them: per held tool, the ttl of
// its requests (the rule's, else approvals.ttl). A rule's index is also its webhooks' (WebhookOptions).
func ApprovalRules(cfg *config.Config) approvals.Rules {
	var rs approvals.Rules
	for _, r := range cfg.ApprovalRules() {
		rs = append(rs, approvals.Rule{Tools: r.Tools, TTL: cfg.TTLOf(r)})
	}
	return rs
}

// WebhookOptions are the webhooks of approvals.rules, by rule, the console's public URL they link
// to, and what they carry of a held call's arguments (webhookArguments, redacted by the audit
// settings and r); each delivery's end is counted in m (toolgate_approval_webhooks_total). Each
// webhook dials through an egress guard of its own (its egress.allow, network's resolver and
// dialer), as upstreams do (serverEgress), and through its proxy only.
func WebhookOptions(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, r *redact.Redactor, network egress.Options) webhook.Options {
	o := webhook.Options{ConsoleURL: cfg.ConsolePublicURL(), Log: log.With("component", "webhook"),
		Arguments: webhookArguments(cfg, r),
		Delivered: func(r webhook.Result) {
			result := metrics.WebhookFailed
			switch {
			case r.Delivered:
				result = metrics.WebhookDelivered
			case r.Dropped:
				result = metrics.WebhookDropped
			}
			m.ApprovalWebhook(r.Hook, result)
		}}
	for i, r := range cfg.ApprovalRules() {
		var hooks []webhook.Hook
		for j, w := range r.Webhooks {
			name := fmt.Sprintf("approvals.rules[%d].webhooks[%d]", i, j)
			guard := egress.Options{Resolver: network.Resolver, Dial: network.Dial, Log: log.With("webhook", name)}
			guard.Allow, guard.AllowPrefixes = w.EgressAllow()
			hooks = append(hooks, webhook.Hook{Name: name, URL: w.URL, Secret: w.Secret, Payload: w.Format, Egress: guard, Proxy: w.Proxy})
		}
		o.Rules = append(o.Rules, hooks)
	}
	return o
}

// webhookArguments is what a webhook delivery carries of a held call's arguments: a receiver is a
// third party (Slack), so it gets what the audit trail would write, nothing without
// audit.include_args and the audit.redact fields replaced, with the secrets r recognises replaced
// too (counted in toolgate_redactions_total); nil when none are sent (docs/console.md,
// "Notifications").
func webhookArguments(cfg *config.Config, r *redact.Redactor) func(json.RawMessage) json.RawMessage {
	if !cfg.AuditIncludeArgs() {
		return nil
	}
	fields := cfg.AuditRedact()
	return func(args json.RawMessage) json.RawMessage {
		// r counts what it replaces. It fails only on invalid JSON, which audit.RedactArgs never
		// writes; were it to, nothing unredacted is sent.
		out, _, err := r.JSON(audit.RedactArgs(args, fields))
		if err != nil {
			return nil
		}
		return out
	}
}

// ConsoleOptions are the approvals console's settings from the config (the approvers, how long a
// sign-in lasts, its public address, which decides Secure cookies behind a TLS proxy) and the text of the policy line a request names, read from the policy file; the
// gateway adds the store, the policy and the log.
func ConsoleOptions(cfg *config.Config) console.Options {
	o := console.Options{SessionTTL: cfg.ConsoleSessionTTL(), PublicURL: cfg.ConsolePublicURL()}
	for _, a := range cfg.ConsoleApprovers() {
		o.Approvers = append(o.Approvers, console.Approver{Name: a.Name, KeySHA256: a.SHA256})
	}
	policy := cfg.PolicyPath()
	o.RuleText = func(ref string) string { return approvalLineText(policy, ref) }
	if x := cfg.ConsoleOIDCConfig(); x != nil {
		o.OIDC = &console.OIDC{Issuer: x.Issuer, ClientID: x.ClientID, ClientSecret: x.ClientSecret,
			RedirectURL: x.RedirectURL, PrincipalClaim: x.PrincipalClaim}
	}
	return o
}

// approvalLineText is the text of the approval (a) line ref names ("<policy file>:<line>"), as the
// policy file reads now, or "" when ref names another file, the file cannot be read, or that line
// is no longer an a line (the file changed since the request was held).
func approvalLineText(policy, ref string) string {
	i := strings.LastIndex(ref, ":")
	if i < 0 || ref[:i] != policy {
		return ""
	}
	n, err := strconv.Atoi(ref[i+1:])
	if err != nil || n < 1 {
		return ""
	}
	data, err := os.ReadFile(policy)
	if err != nil || len(data) > 16<<20 {
		return ""
	}
	for num, line := range strings.Split(string(data), "\n") {
		if num+1 == n {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "a,") {
				return line
			}
			return ""
		}
	}
	return ""
}

// OpenPins opens the tool-pin lock file in the configured mode; opts are
// for read-only use by offline commands.
func OpenPins(cfg *config.Config, opts ...pins.Option) (*pins.Store, error) {
	mode, err := pins.ParseMode(cfg.PinningMode())
	if err != nil {
		return nil, err
	}
	return pins.Open(cfg.PinsPath(), mode, opts...)
}

// UpstreamServers is every configured server (disabled ones included) in
// upstreams' terms, in ServerNames order, with the defaults applied by the
// config's accessors: the tool prefix, init_timeout, the call timeout and
// result cap of the server and of each tool it overrides, and
// description_scan; and the credential source of each server whose auth
// block is not static (upstreams/credentials), which logs nowhere
// (UpstreamServersLogged logs). A nil cfg means no servers.
func UpstreamServers(cfg *config.Config) []upstreams.Server {
	return UpstreamServersLogged(cfg, nil)
}

// UpstreamServersLogged is UpstreamServers whose credential sources log
// to log (a token that could not be had, never a token). Each server's
// stderr and error text are redacted as the config's redaction says.
func UpstreamServersLogged(cfg *config.Config, log *slog.Logger) []upstreams.Server {
	return upstreamServers(cfg, CredentialDeps{Log: log}, egress.Options{}, configRedactor(cfg), nil)
}

// configRedactor is the redactor the config's redaction says, counting
// nothing (nil when redaction is disabled).
func configRedactor(cfg *config.Config) *redact.Redactor {
	if cfg == nil {
		return nil
	}
	r, err := newRedactor(cfg, nil)
	if err != nil { // config.Load refuses what redact.New would: not reached
		return nil
	}
	return r
}

// CredentialDeps are what the upstreams' credential sources use besides
// their config: where they log, and for the modes that act as each user
// (per_user, oauth) the vault and the page where a user connects.
type CredentialDeps struct {
	Log *slog.Logger // nil discards
	// Vault holds each user's credential; nil (the offline commands) holds
	// none, so every caller of such an upstream is asked to connect.
	Vault vault.Store
	// ConnectURL is the gateway page where principal connects to upstream;
	// nil when there is none (the message then asks for an operator).
	ConnectURL func(principal, upstream string) string
	Now        func() time.Time // the sources' clock; nil: time.Now
}

// UpstreamServersWith is UpstreamServers whose credential sources use deps.
func UpstreamServersWith(cfg *config.Config, deps CredentialDeps) []upstreams.Server {
	return upstreamServers(cfg, deps, egress.Options{}, configRedactor(cfg), nil)
}

// upstreamServers is UpstreamServersWith whose egress guards resolve and
// dial with network's Resolver and Dial (zero: the system's), and whose
// stderr lines and error text are redacted by r (nil: not redacted), and
// whose egress refusals m counts (nil: not counted).
func upstreamServers(cfg *config.Config, deps CredentialDeps, network egress.Options, r *redact.Redactor, m *metrics.Metrics) []upstreams.Server {
	log := deps.Log
	if cfg == nil {
		return nil
	}
	out := make([]upstreams.Server, 0, len(cfg.Servers))
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		u := upstreams.Server{
			Name:            name,
			Transport:       upstreams.Transport(s.Transport),
			Command:         s.Command,
			Args:            s.Args,
			Env:             s.Env,
			Cwd:             s.Cwd,
			URL:             s.URL,
			Headers:         s.Headers,
			Protocol:        s.Protocol,
			ToolPrefix:      s.ToolPrefix(),
			Disabled:        s.Disabled,
			InitTimeout:     cfg.InitTimeout(name),
			CallTimeout:     cfg.CallTimeout(name, ""),
			MaxResultBytes:  cfg.MaxResultBytes(name, ""),
			DescriptionScan: upstreams.ScanMode(cfg.DescriptionScanMode(name)),
			Egress:          serverEgress(name, s, network, log, m),
			Redact:          r,
		}
		if s.AuthMode() != config.AuthStatic {
			u.Credentials = upstreamCredentials(name, s.Auth, u.Egress, deps)
		}
		if len(s.Tools) > 0 {
			u.Tools = make(map[string]upstreams.ToolLimits, len(s.Tools))
			for tool := range s.Tools {
				u.Tools[tool] = upstreams.ToolLimits{Timeout: cfg.CallTimeout(name, tool), MaxResultBytes: cfg.MaxResultBytes(name, tool)}
				if o := s.Tools[tool].Override; o != nil {
					if u.Overrides == nil {
						u.Overrides = map[string]*overrides.Override{}
					}
					u.Overrides[tool] = toolOverride(o)
				}
			}
		}
		out = append(out, u)
	}
	return out
}

// newRedactor is the redactor of redaction (nil when it is disabled), which
// counts every secret it replaces in toolgate_redactions_total.
func newRedactor(cfg *config.Config, m *metrics.Metrics) (*redact.Redactor, error) {
	if cfg.Redaction.Disabled {
		return nil, nil
	}
	o := redact.Options{Patterns: cfg.RedactPatterns(), Disable: cfg.Redaction.Disable}
	if m != nil {
		o.Count = m.Redacted
	}
	return redact.New(o)
}

// serverEgress is the egress guard's settings for one server: what its
// egress.allow opens, network's resolver and dialer, and a log that names
// the server (a refusal is logged with the address and its class) and m's
// toolgate_egress_refused_total (nil: not counted).
func serverEgress(name string, s *config.Server, network egress.Options, log *slog.Logger, m *metrics.Metrics) egress.Options {
	o := egress.Options{Resolver: network.Resolver, Dial: network.Dial}
	if m != nil {
		o.Refused = func(c egress.Class) { m.EgressRefused(name, string(c)) }
	}
	o.Allow, o.AllowPrefixes = s.EgressAllow()
	if log != nil {
		o.Log = log.With("server", name)
	}
	return o
}

// toolOverride is a tool's override as the catalog applies it.
func toolOverride(o *config.ToolOverride) *overrides.Override {
	out := &overrides.Override{Name: o.Name, Title: o.Title, Description: o.Description,
		DescriptionAppend: o.DescriptionAppend, Hide: o.Hide, Narrow: o.Narrow}
	if a := o.Annotations; a != nil {
		out.ReadOnlyHint, out.DestructiveHint, out.IdempotentHint, out.OpenWorldHint =
			a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint
	}
	return out
}

// upstreamCredentials is the credential source of an upstream whose auth
// block is not static.
func upstreamCredentials(name string, a *config.UpstreamAuth, network egress.Options, deps CredentialDeps) upstreams.Credentials {
	if a.Mode == config.AuthOAuth { // the gateway gives these their sources (withUserCredentials)
		return refusedCredentials{errors.New("upstream " + strconv.Quote(name) + " acts as each user (auth mode oauth): only a serving gateway holds their tokens")}
	}
	if a.Mode == config.AuthPerUser {
		return perUserCredentials(name, a, deps)
	}
	log := deps.Log
	o := credentials.Options{
		Server: name, Mode: credentials.Mode(a.Mode), TokenURL: a.TokenURL, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
		Scopes: a.Scopes, Audience: a.Audience, Resource: a.Resource,
		FallbackClientCredentials: a.Fallback == config.AuthClientCredentials,
		Caller:                    callerOf, Log: log, Egress: network, Now: deps.Now,
	}
	if a.SubjectTokenType == "jwt" {
		o.SubjectTokenType = credentials.TokenTypeJWT
	}
	src, err := credentials.New(o)
	if err != nil { // config.Load refuses what New would: not reached
		return refusedCredentials{err}
	}
	return src
}

// perUserCredentials is the credential source of a per_user upstream:
// each caller's own secret from the vault.
func perUserCredentials(name string, a *config.UpstreamAuth, deps CredentialDeps) upstreams.Credentials {
	src, err := credentials.NewPerUser(credentials.PerUserOptions{
		Server: name, Vault: deps.Vault, Header: a.Header, Format: a.Format, ServiceSecret: a.ServiceSecret,
		Caller: callerOf, ConnectURL: deps.ConnectURL, Log: deps.Log, Now: deps.Now,
	})
	if err != nil { // config.Load refuses what NewPerUser would: not reached
		return refusedCredentials{err}
	}
	return src
}

// callerOf is who made a request to an upstream: the subject the
// transport authenticated (with its JWT, if it presented one), carried by
// the call's context; none for the gateway's own requests.
func callerOf(ctx context.Context) (credentials.Caller, bool) {
	s := proxy.SubjectFrom(ctx)
	if s.Principal == "" {
		return credentials.Caller{}, false
	}
	return credentials.Caller{Principal: s.Principal, Token: s.Bearer.Reveal()}, true
}

// refusedCredentials send nothing: the upstream's credentials could not be
// built.
type refusedCredentials struct{ err error }

func (r refusedCredentials) Authorization(context.Context) (string, error) { return "", r.err }
func (refusedCredentials) Rejected(context.Context, string)                {}

// ToolsetsFrom is the selector of toolset_rules over the toolsets they
// name; nil when no rule is written (every client sees every tool the
// policy allows). Exported for `toolgate tools`, which shows a toolset's
// view.
func ToolsetsFrom(cfg *config.Config) *toolsets.Selector {
	if cfg == nil || len(cfg.ToolsetRules) == 0 {
		return nil
	}
	sets := ToolsetSets(cfg)
	rules := make([]toolsets.Rule, len(cfg.ToolsetRules))
	for i, r := range cfg.ToolsetRules {
		rules[i] = toolsets.Rule{Principal: r.Principal, Role: r.Role, Client: r.Client, Headers: r.Header, Set: sets[r.Toolset]}
	}
	return toolsets.New(toolsets.Options{Rules: rules})
}

// ToolsetSets is every toolset of the config by name.
func ToolsetSets(cfg *config.Config) map[string]*toolsets.Set {
	sets := make(map[string]*toolsets.Set, len(cfg.Toolsets))
	for name, t := range cfg.Toolsets {
		sets[name] = &toolsets.Set{Name: name, Tools: t.Tools, Exclude: t.Exclude, Discovery: t.Discovery}
	}
	return sets
}
