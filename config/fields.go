package config

import (
	"github.com/goccy/go-yaml/ast"
)

// The tables below are the schema of toolgate.yaml: one line per allowed key. Unknown-key messages list
// their keys, and a test checks them against the yaml tags in types.go so the two cannot drift apart.

func (l *loader) configFields(c *Config) fields {
	return fields{
		"listen":     func(n ast.Node, p string) { l.object(n, p, l.listenFields(&c.Listen)) },
		"authz":      func(n ast.Node, p string) { l.object(n, p, l.authzFields(&c.Authz)) },
		"auth":       func(n ast.Node, p string) { l.object(n, p, l.authFields(&c.Auth)) },
		"limits":     func(n ast.Node, p string) { l.object(n, p, l.limitsFields(&c.Limits)) },
		"mcpServers": set(&c.Servers, l.servers),
		"pinning":    func(n ast.Node, p string) { l.object(n, p, l.pinningFields(&c.Pinning)) },
		// description_scan is gateway-wide (not under limits): it is a security setting, not a call limit.
		"description_scan": set(&c.DescriptionScan, l.str),
		"admin":            func(n ast.Node, p string) { l.object(n, p, l.adminFields(&c.Admin)) },
		"approvals":        func(n ast.Node, p string) { l.object(n, p, l.approvalsFields(&c.Approvals)) },
		"audit":            func(n ast.Node, p string) { l.object(n, p, l.auditFields(&c.Audit)) },
		"rate_limits":      func(n ast.Node, p string) { l.object(n, p, l.rateLimitsFields(&c.RateLimits)) },
		"state":            func(n ast.Node, p string) { l.object(n, p, l.stateFields(&c.State)) },
		"console":          func(n ast.Node, p string) { l.object(n, p, l.consoleFields(&c.Console)) },
		"credentials":      func(n ast.Node, p string) { l.object(n, p, l.credentialsFields(&c.Credentials)) },
		"toolsets":         set(&c.Toolsets, l.toolsets),
		"toolset_rules":    set(&c.ToolsetRules, l.toolsetRules),
		"connect":          func(n ast.Node, p string) { l.object(n, p, l.connectFields(&c.Connect)) },
		"redaction":        func(n ast.Node, p string) { l.object(n, p, l.redactionFields(&c.Redaction)) },
	}
}

func (l *loader) auditFields(x *Audit) fields {
	return fields{
		"disabled":       set(&x.Disabled, l.boolean),
		"file":           set(&x.File, l.str),
		"fsync":          set(&x.Fsync, l.str),
		"fsync_interval": set(&x.FsyncInterval, l.duration),
		"max_bytes":      set(&x.MaxBytes, l.bytes),
		"max_files":      set(&x.MaxFiles, l.count),
		"include_args":   set(&x.IncludeArgs, l.boolean),
		"redact":         set(&x.Redact, l.strList),
		"fail_closed":    set(&x.FailClosed, l.boolean),
	}
}

func (l *loader) adminFields(x *Admin) fields {
	return fields{
		"listen":     set(&x.Listen, l.str),
		"key_sha256": set(&x.KeySHA256, l.str),
	}
}

func (l *loader) approvalsFields(x *Approvals) fields {
	return fields{
		"file":  set(&x.File, l.str),
		"ttl":   set(&x.TTL, l.duration),
		"rules": set(&x.Rules, l.approvalRules),
	}
}

func (l *loader) pinningFields(x *Pinning) fields {
	return fields{
		"mode": set(&x.Mode, l.str),
		"file": set(&x.File, l.str),
	}
}

func (l *loader) listenFields(x *Listen) fields {
	return fields{
		"http":             set(&x.HTTP, l.str),
		"max_body_bytes":   set(&x.MaxBodyBytes, l.bytes),
		"session_idle_ttl": set(&x.SessionIdleTTL, l.duration),
		"allowed_origins":  set(&x.AllowedOrigins, l.strList),
		"fast_path":        set(&x.FastPath, l.optBool),
	}
}

func (l *loader) authzFields(x *Authz) fields {
	return fields{
		"model":               set(&x.Model, l.str),
		"policy":              set(&x.Policy, l.str),
		"refuse_deny_removal": set(&x.RefuseDenyRemoval, l.boolean),
		"shadow_policy":       set(&x.ShadowPolicy, l.str),
	}
}

func (l *loader) authFields(x *Auth) fields {
	return fields{
		"stdio_principal": set(&x.StdioPrincipal, l.str),
		"allow_anonymous": set(&x.AllowAnonymous, l.anonymous),
		"resource":        set(&x.Resource, l.str),
		"api_keys":        set(&x.APIKeys, l.apiKeys),
		"jwt": func(n ast.Node, p string) {
			x.JWT = &JWT{}
			l.object(n, p, l.jwtFields(x.JWT))
		},
	}
}

func (l *loader) apiKeyFields(x *APIKey) fields {
	return fields{
		"principal":  set(&x.Principal, l.str),
		"sha256":     set(&x.SHA256, l.str),
		"attributes": func(n ast.Node, p string) { x.Attributes = l.strMap(n, p, l.checkAttrName) },
	}
}

func (l *loader) jwtFields(x *JWT) fields {
	return fields{
		"issuer":           set(&x.Issuer, l.str),
		"audience":         set(&x.Audience, l.str),
		"jwks_url":         set(&x.JWKSURL, l.str),
		"jwks_file":        set(&x.JWKSFile, l.str),
		"jwks_refresh":     set(&x.JWKSRefresh, l.duration),
		"clock_skew":       set(&x.ClockSkew, l.optDuration),
		"principal_claim":  set(&x.PrincipalClaim, l.str),
		"roles_claim":      set(&x.RolesClaim, l.str),
		"attribute_claims": set(&x.AttributeClaims, l.strList),
		"algorithms":       set(&x.Algorithms, l.strList),
	}
}

// movedKeys are keys earlier releases accepted, with what replaced them, so that an old config file gets a
// message that says what to write instead of only "unknown key".
var movedKeys = map[string]string{
	"listen.allow_anonymous":     "replaced by auth.allow_anonymous: <principal>, the principal unauthenticated callers act as",
	"listen.anonymous_principal": "replaced by auth.allow_anonymous: <principal>, the principal unauthenticated callers act as",
}

// anonymous is a principal name. The boolean of earlier releases gets a message saying so rather than
// "quote it", because quoting "true" would make a principal named true.
func (l *loader) anonymous(n ast.Node, path string) string {
	if _, isBool := n.(*ast.BoolNode); isBool {
		l.fail(n, path, "expected the principal unauthenticated callers act as (a name such as guest), got %s; "+
			"leave it out to refuse calls without a credential", describe(n))
		return ""
	}
	return l.str(n, path)
}

// optBool keeps nil for "not written", so that an explicit false can differ from "not stated".
func (l *loader) optBool(n ast.Node, path string) *bool {
	b := l.boolean(n, path)
	if l.bad[path] {
		return nil
	}
	return &b
}

// optNumber keeps nil for "not written", so that an explicit 0 can differ from the default.
func (l *loader) optNumber(n ast.Node, path string) *float64 {
	f := l.number(n, path)
	if l.bad[path] {
		return nil
	}
	return &f
}

// optDuration keeps nil for "not written", so that an explicit 0s can differ from the default.
func (l *loader) optDuration(n ast.Node, path string) *Duration {
	d := l.duration(n, path)
	if l.bad[path] {
		return nil
	}
	return &d
}

func (l *loader) limitsFields(x *Limits) fields {
	return fields{
		"timeout":            set(&x.Timeout, l.duration),
		"max_result_bytes":   set(&x.MaxResultBytes, l.bytes),
		"init_timeout":       set(&x.InitTimeout, l.duration),
		"max_in_flight":      set(&x.MaxInFlight, l.count),
		"breaker":            func(n ast.Node, p string) { l.object(n, p, l.breakerFields(&x.Breaker)) },
		"retry":              func(n ast.Node, p string) { l.object(n, p, l.retryFields(&x.Retry)) },
		"retry_budget":       func(n ast.Node, p string) { l.object(n, p, l.retryBudgetFields(&x.RetryBudget)) },
		"dedup":              func(n ast.Node, p string) { l.object(n, p, l.dedupFields(&x.Dedup)) },
		"max_argument_bytes": set(&x.MaxArgumentBytes, l.bytes),
		"max_argument_depth": set(&x.MaxArgumentDepth, l.count),
	}
}

func (l *loader) dedupFields(x *Dedup) fields {
	return fields{
		"window":             set(&x.Window, l.optDuration),
		"key_window":         set(&x.KeyWindow, l.duration),
		"max_entries":        set(&x.MaxEntries, l.count),
		"max_bytes":          set(&x.MaxBytes, l.bytes),
		"include_retry_safe": set(&x.IncludeRetrySafe, l.boolean),
	}
}

func (l *loader) breakerFields(x *Breaker) fields {
	return fields{
		"failures":         set(&x.Failures, l.count),
		"open_for":         set(&x.OpenFor, l.duration),
		"half_open_probes": set(&x.HalfOpenProbes, l.count),
	}
}

func (l *loader) retryFields(x *Retry) fields {
	return fields{
		"max_attempts": set(&x.MaxAttempts, l.count),
		"base_delay":   set(&x.BaseDelay, l.duration),
		"max_delay":    set(&x.MaxDelay, l.duration),
	}
}

func (l *loader) retryBudgetFields(x *RetryBudget) fields {
	return fields{
		"ratio":          set(&x.Ratio, l.optNumber),
		"min_per_second": set(&x.MinPerSecond, l.optNumber),
	}
}

func (l *loader) serverFields(x *Server) fields {
	return fields{
		"command":          set(&x.Command, l.str),
		"args":             set(&x.Args, l.strList),
		"env":              func(n ast.Node, p string) { x.Env = l.strMap(n, p, l.checkEnvName) },
		"cwd":              set(&x.Cwd, l.str),
		"url":              set(&x.URL, l.str),
		"headers":          func(n ast.Node, p string) { x.Headers = l.strMap(n, p, l.checkHeaderName) },
		"auth":             set(&x.Auth, l.upstreamAuth),
		"egress":           set(&x.Egress, l.egress),
		"type":             set(&x.Type, l.str),
		"prefix":           set(&x.Prefix, l.prefix),
		"disabled":         set(&x.Disabled, l.boolean),
		"timeout":          set(&x.Timeout, l.duration),
		"max_result_bytes": set(&x.MaxResultBytes, l.bytes),
		"init_timeout":     set(&x.InitTimeout, l.duration),
		"max_in_flight":    set(&x.MaxInFlight, l.count),
		"breaker":          func(n ast.Node, p string) { l.object(n, p, l.breakerFields(&x.Breaker)) },
		"retry":            func(n ast.Node, p string) { l.object(n, p, l.retryFields(&x.Retry)) },
		"trusted":          set(&x.Trusted, l.boolean),
		"retry_safe":       set(&x.RetrySafe, l.optBool),
		"description_scan": set(&x.DescriptionScan, l.str),
		"protocol":         set(&x.Protocol, l.str),
		"required":         set(&x.Required, l.boolean),
		"tools":            set(&x.Tools, l.tools),
	}
}

func (l *loader) toolFields(x *Tool) fields {
	return fields{
		"timeout":          set(&x.Timeout, l.duration),
		"max_result_bytes": set(&x.MaxResultBytes, l.bytes),
		"retry_safe":       set(&x.RetrySafe, l.optBool),
		"override":         func(n ast.Node, p string) { x.Override = l.toolOverride(n, p) },
	}
}

func (l *loader) servers(n ast.Node, path string) map[string]*Server {
	es := l.entries(n, path, "a mapping of server names to servers")
	out := make(map[string]*Server, len(es))
	for _, e := range es {
		s := &Server{Name: e.key}
		l.object(e.val, e.path, l.serverFields(s))
		out[e.key] = s
	}
	return out
}

func (l *loader) tools(n ast.Node, path string) map[string]*Tool {
	es := l.entries(n, path, "a mapping of upstream tool names to overrides")
	out := make(map[string]*Tool, len(es))
	for _, e := range es {
		t := &Tool{}
		l.object(e.val, e.path, l.toolFields(t))
		out[e.key] = t
	}
	return out
}

func (l *loader) apiKeys(n ast.Node, path string) []APIKey {
	return objectList(l, n, path, "{principal, sha256}", l.apiKeyFields)
}

// objectList decodes a list of mappings, each item's keys by fieldsOf, and
// notes each item's line; what names the mappings' keys for the error.
func objectList[T any](l *loader, n ast.Node, path, what string, fieldsOf func(*T) fields) []T {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		l.fail(n, path, "expected a list of %s mappings, got %s", what, describe(n))
		return nil
	}
	out := make([]T, len(seq.Values))
	for i, item := range seq.Values {
		p := index(path, i)
		l.lines[p] = line(item)
		l.object(item, p, fieldsOf(&out[i]))
	}
	return out
}

// prefix keeps nil for "not written" so that ToolPrefix can tell the default from an explicit "".
func (l *loader) prefix(n ast.Node, path string) *string {
	s := l.str(n, path)
	if l.bad[path] {
		return nil
	}
	return &s
}
