package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/upstreams"
	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/egress"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

const breakersYAML = `
limits:
  breaker: {failures: 2, open_for: 1m}
  retry: {max_attempts: 4, max_delay: 5s}
  retry_budget: {ratio: 0, min_per_second: 3}
mcpServers:
  orders:
    command: orders
    breaker: {half_open_probes: 3}
    retry: {base_delay: 10ms}
  search:
    url: http://127.0.0.1:9000/mcp
    egress: {allow: [loopback]}
    disabled: true
`

func TestBreakerSettingsFrom(t *testing.T) {
	cfg, err := config.Parse("toolgate.yaml", []byte(breakersYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := breakerSettingsFrom(cfg)
	want := map[string]breaker.Settings{
		"orders": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 3},
		"search": {Failures: 2, OpenFor: time.Minute, HalfOpenProbes: 1},
	}
	if len(got) != len(want) || got["orders"] != want["orders"] || got["search"] != want["search"] {
		t.Fatalf("breakerSettingsFrom = %+v, want %+v", got, want)
	}
	retries := []struct {
		server string
		want   breaker.RetrySettings
	}{
		{"orders", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"search", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
		{"unknown", breaker.RetrySettings{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}},
	}
	for _, r := range retries {
		if got := retryFrom(cfg, r.server); got != r.want {
			t.Errorf("retryFrom(%s) = %+v, want %+v", r.server, got, r.want)
		}
	}
	budgets := budgetsFrom(cfg, func() time.Time { return time.Unix(0, 0) })
	if len(budgets) != 2 || budgets["orders"] == budgets["search"] {
		t.Fatalf("want one budget per server, got %v", budgets)
	}
	n := 0
	for budgets["orders"].TryRetry() {
		n++
	}
	if n != 3 { // ratio 0, min_per_second 3: one second of the floor at start
		t.Fatalf("orders budget allowed %d retries at start, want 3", n)
	}
}

func TestBreakersFromNilConfig(t *testing.T) {
	if len(breakerSettingsFrom(nil)) != 0 || len(budgetsFrom(nil, nil)) != 0 {
		t.Fatal("a nil config has no servers")
	}
	if got, want := retryFrom(nil, "x"), (breaker.RetrySettings{}).WithDefaults(); got != want {
		t.Fatalf("retryFrom(nil) = %+v, want %+v", got, want)
	}
}

// TestBreakerSetFromConfig: the settings breakerSettingsFrom reads drive the breakers NewSet builds.
func TestBreakerSetFromConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := config.Parse("toolgate.yaml", []byte(breakersYAML), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s := breaker.NewSet(breakerSettingsFrom(cfg), slog.New(slog.DiscardHandler))
		for range 2 {
			done, err := s.Allow("orders")
			if err != nil {
				t.Fatal(err)
			}
			done(breaker.NeverSent)
		}
		_, err = s.Allow("orders")
		if oe, ok := err.(*breaker.OpenError); !ok || oe.RetryIn != time.Minute {
			t.Fatalf("after 2 failures: %v, want an OpenError with RetryIn 1m", err)
		}
		if s.State("search") != "closed" {
			t.Fatal("search affected")
		}
	})
}

// breaker's defaults (what a zero setting stands for) are config's: a
// setting left out of the config means the same whichever applies it.
func TestBreakerDefaultsMatchConfig(t *testing.T) {
	if got, want := (breaker.Settings{}).WithDefaults(), (breaker.Settings{Failures: config.DefaultBreakerFailures,
		OpenFor: config.DefaultBreakerOpenFor, HalfOpenProbes: config.DefaultBreakerHalfOpenProbes}); got != want {
		t.Errorf("breaker defaults %+v, config's %+v", got, want)
	}
	if got, want := (breaker.RetrySettings{}).WithDefaults(), (breaker.RetrySettings{MaxAttempts: config.DefaultRetryMaxAttempts,
		BaseDelay: config.DefaultRetryBaseDelay, MaxDelay: config.DefaultRetryMaxDelay}); got != want {
		t.Errorf("retry defaults %+v, config's %+v", got, want)
	}
	if got, want := breakerSettingsFrom(&config.Config{Servers: map[string]*config.Server{"s": {}}})["s"], (breaker.Settings{}).WithDefaults(); got != want {
		t.Errorf("a server without settings: %+v, want the breaker defaults %+v", got, want)
	}
}

// Config rate limits arrive in the guard's terms: rate per second and the
// burst (defaulting to the rate per period); roles and tools by name.
func TestLimitsFromConfig(t *testing.T) {
	l := limitsFrom(config.RateLimits{
		Principal: &config.RateLimit{Rate: 60, Per: config.Duration(time.Minute)},
		Roles:     map[string]*config.RateLimit{"viewer": {Rate: 2}},
		Tools:     map[string]*config.RateLimit{"orders/*": {Rate: 10, Burst: 20}},
	})
	got := fmt.Sprintf("%+v %+v %+v", *l.Principal, l.Roles, l.Tools)
	if want := "{PerSecond:1 Burst:60} map[viewer:{PerSecond:2 Burst:2}] map[orders/*:{PerSecond:10 Burst:20}]"; got != want {
		t.Errorf("limits %s, want %s", got, want)
	}
	if !limitsFrom(config.RateLimits{}).Empty() {
		t.Error("no rate_limits: the guard should be left out")
	}
}

// authYAML sets every key of the auth section (stdio_principal is not authn's; jwks_file is the
// alternative to jwks_url, in authFileYAML).
const authYAML = `
auth:
  stdio_principal: local
  allow_anonymous: guest
  resource: "https://gw.example.com/mcp"
  api_keys:
    - principal: alice
      sha256: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
      attributes: {region: eu, tier: gold}
    - principal: bob
      sha256: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
  jwt:
    issuer: "https://idp.example.com/"
    audience: "api://toolgate"
    jwks_url: "https://idp.example.com/jwks.json"
    jwks_refresh: 15m
    clock_skew: 30s
    principal_claim: preferred_username
    roles_claim: realm_access.roles
    attribute_claims: [region, org]
    algorithms: [RS256, ES384]
`

// authFileYAML leaves every JWT key with a default out, takes the keys from a file relative to the config
// file, and turns clock skew off.
const authFileYAML = `
auth:
  resource: "https://gw.example.com/mcp"
  jwt:
    issuer: "https://idp.example.com/"
    jwks_file: keys/jwks.json
    clock_skew: 0s
`

func parseConfig(t *testing.T, path, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(path, []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAuthnOptions: every auth key reaches authn.Options; keys left out arrive as config's defaults, an
// explicit clock_skew: 0s as authn.NoClockSkew, and jwks_file resolved against the config file's directory.
func TestAuthnOptions(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		want authn.Options
	}{
		{"every key", authYAML, authn.Options{
			Resource:       "https://gw.example.com/mcp",
			AllowAnonymous: "guest",
			APIKeys: []authn.APIKey{
				{Principal: "alice", SHA256: strings.Repeat("a", 64), Attributes: map[string]string{"region": "eu", "tier": "gold"}},
				{Principal: "bob", SHA256: strings.Repeat("b", 64)},
			},
			JWT: &authn.JWTOptions{
				Issuer:          "https://idp.example.com/",
				Audience:        "api://toolgate",
				JWKSURL:         "https://idp.example.com/jwks.json",
				Refresh:         15 * time.Minute,
				ClockSkew:       30 * time.Second,
				PrincipalClaim:  "preferred_username",
				RolesClaim:      "realm_access.roles",
				AttributeClaims: []string{"region", "org"},
				Algorithms:      []string{"RS256", "ES384"},
			},
		}},
		{"defaults, a jwks_file and no clock skew", authFileYAML, authn.Options{
			Resource: "https://gw.example.com/mcp",
			JWT: &authn.JWTOptions{
				Issuer:         "https://idp.example.com/",
				Audience:       "https://gw.example.com/mcp",
				JWKSFile:       filepath.Join(dir, "keys", "jwks.json"),
				Refresh:        authn.DefaultJWKSRefresh,
				ClockSkew:      authn.NoClockSkew,
				PrincipalClaim: authn.DefaultPrincipalClaim,
				Algorithms:     authn.DefaultAlgorithms(),
			},
		}},
		{"no auth section", "", authn.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AuthnOptions(parseConfig(t, filepath.Join(dir, "toolgate.yaml"), tt.yaml))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("AuthnOptions =\n%s\nwant\n%s", dump(got), dump(tt.want))
			}
		})
	}

	// The first case must exercise every field of Options, so a field added to authn later and not
	// carried here fails this test. Only JWKSFile, the alternative to JWKSURL, is in the second case.
	got := AuthnOptions(parseConfig(t, filepath.Join(dir, "toolgate.yaml"), authYAML))
	for _, v := range []any{got, *got.JWT, got.APIKeys[0]} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if f := rv.Type().Field(i); f.Name != "JWKSFile" && rv.Field(i).IsZero() {
				t.Errorf("%s.%s is not set by a config with every auth key", rv.Type().Name(), f.Name)
			}
		}
	}
}

// TestAuthnOptionsBuildAnAuthenticator: the converted options are ones authn.New accepts, and the API keys
// work (the upper-case hash in the config is folded by config, the attributes arrive).
func TestAuthnOptionsBuildAnAuthenticator(t *testing.T) {
	const key = "tg_gateway_test_key"
	cfg := parseConfig(t, filepath.Join(t.TempDir(), "toolgate.yaml"),
		"auth:\n  api_keys:\n    - {principal: alice, sha256: \""+strings.ToUpper(authn.HashKey(key))+"\", attributes: {region: eu}}\n")
	a, err := authn.New(t.Context(), AuthnOptions(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	sub, err := a.Authenticate(r)
	if err != nil || sub.Principal != "alice" || sub.Attrs["region"] != "eu" {
		t.Fatalf("got %+v, %v", sub, err)
	}
}

func dump(o authn.Options) string {
	s := fmt.Sprintf("%+v", o)
	if o.JWT != nil {
		s += fmt.Sprintf("\nJWT: %+v", *o.JWT)
	}
	return s
}

const upstreamsYAML = `
limits:
  timeout: 5s
  max_result_bytes: 65536
  init_timeout: 3s
description_scan: quarantine
mcpServers:
  orders:
    command: ./bin/orders
    args: [--db, orders.db]
    env: {ORDERS_TOKEN: t}
    cwd: work
    prefix: o_
    timeout: 2s
    max_result_bytes: 4096
    init_timeout: 1s
    description_scan: "off"
    protocol: "2026-07-28"
    tools:
      slow: {timeout: 30s}
      big:
        max_result_bytes: 1048576
        override: {name: huge, description_append: "Big.", annotations: {readOnlyHint: true}, hide: {size: 9007199254740993}, narrow: {mode: {enum: [a]}}}
  search:
    url: http://127.0.0.1:9000/mcp
    egress: {allow: [loopback]}
    headers: {X-Api-Key: k}
    prefix: ""
    disabled: true
  legacy:
    url: http://127.0.0.1:9001/sse
    egress: {allow: [127.0.0.0/8]}
    type: sse
  inventory:
    url: https://inventory.example.com/mcp
    auth: {mode: client_credentials, token_url: "https://idp.example.com/oauth/token", client_id: toolgate, client_secret: "${INVENTORY_SECRET}"}
`

// TestUpstreamServers: every server key upstreams needs reaches upstreams.Server, in ServerNames order;
// limits left out arrive resolved the way the config's accessors resolve them.
func TestUpstreamServers(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse(filepath.Join(dir, "toolgate.yaml"), []byte(upstreamsYAML), func(name string) (string, bool) {
		return "inventory-secret", name == "INVENTORY_SECRET"
	})
	if err != nil {
		t.Fatal(err)
	}
	got := UpstreamServers(cfg)
	if _, ok := got[0].Credentials.(*credentials.Source); !ok {
		t.Fatalf("inventory (auth mode client_credentials) has Credentials %T, want a *credentials.Source", got[0].Credentials)
	}
	plain := slices.Clone(got)
	plain[0].Credentials = nil // compared above
	for i := range plain {
		if plain[i].Redact == nil {
			t.Fatalf("%s has no redactor though redaction is on by default", plain[i].Name)
		}
		plain[i].Redact = nil
	}
	yes := true
	want := []upstreams.Server{
		{Name: "inventory", Transport: upstreams.TransportHTTP, URL: "https://inventory.example.com/mcp", ToolPrefix: "inventory__",
			InitTimeout: 3 * time.Second, CallTimeout: 5 * time.Second, MaxResultBytes: 65536, DescriptionScan: upstreams.ScanQuarantine},
		{Name: "legacy", Transport: upstreams.TransportSSE, URL: "http://127.0.0.1:9001/sse", ToolPrefix: "legacy__",
			Egress:      egress.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			InitTimeout: 3 * time.Second, CallTimeout: 5 * time.Second, MaxResultBytes: 65536, DescriptionScan: upstreams.ScanQuarantine},
		{Name: "orders", Transport: upstreams.TransportStdio, Command: filepath.Join(dir, "bin", "orders"),
			Args: []string{"--db", "orders.db"}, Env: map[string]string{"ORDERS_TOKEN": "t"}, Cwd: filepath.Join(dir, "work"),
			Protocol: "2026-07-28", ToolPrefix: "o_",
			InitTimeout: time.Second, CallTimeout: 2 * time.Second, MaxResultBytes: 4096,
			Tools: map[string]upstreams.ToolLimits{
				"slow": {Timeout: 30 * time.Second, MaxResultBytes: 4096},
				"big":  {Timeout: 2 * time.Second, MaxResultBytes: 1 << 20},
			},
			Overrides: map[string]*overrides.Override{"big": {Name: "huge", DescriptionAppend: "Big.", ReadOnlyHint: &yes,
				Hide:   map[string]json.RawMessage{"size": json.RawMessage(`9007199254740993`)},
				Narrow: map[string]json.RawMessage{"mode": json.RawMessage(`{"enum":["a"]}`)}}},
			DescriptionScan: upstreams.ScanOff},
		{Name: "search", Transport: upstreams.TransportHTTP, URL: "http://127.0.0.1:9000/mcp",
			Headers: map[string]string{"X-Api-Key": "k"}, Disabled: true, Egress: egress.Options{Allow: []egress.Class{egress.Loopback}},
			InitTimeout: 3 * time.Second, CallTimeout: 5 * time.Second, MaxResultBytes: 65536, DescriptionScan: upstreams.ScanQuarantine},
	}
	if !reflect.DeepEqual(plain, want) {
		t.Fatalf("UpstreamServers =\n%+v\nwant\n%+v", plain, want)
	}

	// Together the servers must exercise every field of upstreams.Server and ToolLimits, so a field added
	// to upstreams later and not carried here fails this test.
	for _, typ := range []reflect.Type{reflect.TypeFor[upstreams.Server](), reflect.TypeFor[upstreams.ToolLimits]()} {
		for i := range typ.NumField() {
			set := false
			for _, s := range got {
				v := reflect.ValueOf(s)
				if typ == reflect.TypeFor[upstreams.ToolLimits]() {
					for _, tl := range s.Tools {
						set = set || !reflect.ValueOf(tl).Field(i).IsZero()
					}
					continue
				}
				set = set || !v.Field(i).IsZero()
			}
			if !set {
				t.Errorf("%s.%s is not set by any server of a config with every server key", typ.Name(), typ.Field(i).Name)
			}
		}
	}
}

// TestUpstreamServersDefaults: a server with no limits gets config's defaults, since a zero limit means
// none to upstreams; a nil config has no servers.
func TestUpstreamServersDefaults(t *testing.T) {
	got := UpstreamServers(parseConfig(t, filepath.Join(t.TempDir(), "toolgate.yaml"), "mcpServers:\n  s:\n    command: s\n"))
	want := []upstreams.Server{{Name: "s", Transport: upstreams.TransportStdio, Command: "s", ToolPrefix: "s__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout, MaxResultBytes: config.DefaultMaxResultBytes,
		DescriptionScan: config.DefaultDescriptionScan}}
	if len(got) == 1 {
		want[0].Cwd = got[0].Cwd // the config file's directory, resolved by Load
		if got[0].Redact == nil {
			t.Fatal("no redactor though redaction is on by default")
		}
		got[0].Redact = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UpstreamServers =\n%+v\nwant\n%+v", got, want)
	}
	if UpstreamServers(nil) != nil {
		t.Fatal("a nil config has servers")
	}
}
