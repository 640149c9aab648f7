package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadFullExample loads a config with every optional key (the reference is docs/configuration.md) and
// checks values arrive typed and resolved.
func TestLoadFullExample(t *testing.T) {
	t.Setenv("SEARCH_TOKEN", "tok")
	t.Setenv("HOME", "/home/op")
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	orders, search, legacy := c.Servers["orders"], c.Servers["search"], c.Servers["legacy"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"File", c.File, filepath.Join(dir, "full.yaml")},
		{"HTTPAddr", c.HTTPAddr(), "127.0.0.1:8080"},
		{"MaxBodyBytes", c.MaxBodyBytes(), int64(8 << 20)},
		{"SessionIdleTTL", c.SessionIdleTTL(), time.Hour},
		{"origin lowercased", c.Listen.AllowedOrigins[0], "https://app.example.com"},
		{"ModelPath", c.ModelPath(), filepath.Join(dir, "model.conf")},
		{"PolicyPath", c.PolicyPath(), filepath.Join(dir, "policies", "policy.csv")},
		{"StdioPrincipal", c.StdioPrincipal(), "local"},
		{"api key principal", c.Auth.APIKeys[0].Principal, "alice"},
		{"api key hash lowercased", c.Auth.APIKeys[0].SHA256, hashA},
		{"api key attribute", c.Auth.APIKeys[0].Attributes["region"], "eu"},
		{"allow_anonymous", c.Auth.AllowAnonymous, "guest"},
		{"resource", c.Auth.Resource, "https://gw.example.com/mcp"},
		{"JWT issuer", c.Auth.JWT.Issuer, "https://idp.example.com/"},
		{"JWTAudience", c.JWTAudience(), "toolgate-api"},
		{"JWKS file resolved", c.Auth.JWT.JWKSFile, filepath.Join(dir, "keys", "jwks.json")},
		{"JWKSRefresh", c.JWKSRefresh(), 15 * time.Minute},
		{"JWTClockSkew", c.JWTClockSkew(), 30 * time.Second},
		{"JWTPrincipalClaim", c.JWTPrincipalClaim(), "preferred_username"},
		{"roles claim", c.Auth.JWT.RolesClaim, "realm_access.roles"},
		{"attribute claims", strings.Join(c.Auth.JWT.AttributeClaims, ","), "region"},
		{"JWTAlgorithms", strings.Join(c.JWTAlgorithms(), ","), "RS256,EdDSA"},
		{"ServerNames", strings.Join(c.ServerNames(), ","), "legacy,orders,search"},
		{"orders transport", orders.Transport, TransportStdio},
		{"orders name", orders.Name, "orders"},
		{"orders command", orders.Command, "toolgate"},
		{"orders args", strings.Join(orders.Args, " "), "demo-orders"},
		{"orders env", orders.Env["ORDERS_DB"], "/home/op/orders.db"},
		{"orders cwd", orders.Cwd, filepath.Join(dir, "work")},
		{"orders prefix", orders.ToolPrefix(), "orders__"},
		{"tool override", c.CallTimeout("orders", "export_orders"), 2 * time.Minute},
		{"tool bytes override", c.MaxResultBytes("orders", "export_orders"), int64(16 << 20)},
		{"server override", c.CallTimeout("orders", "get_order"), 3 * time.Second},
		{"limits fallback", c.MaxResultBytes("orders", "get_order"), int64(2 << 20)},
		{"limits init", c.InitTimeout("orders"), 20 * time.Second},
		{"search transport", search.Transport, TransportHTTP},
		{"search header", search.Headers["Authorization"], "Bearer tok"},
		{"search unprefixed", search.ToolPrefix(), ""},
		{"search init", c.InitTimeout("search"), 30 * time.Second},
		{"search egress", fmt.Sprint(search.EgressAllow()), "[loopback] [10.20.0.0/16]"},
		{"search timeout from limits", c.CallTimeout("search", "q"), 5 * time.Second},
		{"legacy transport", legacy.Transport, TransportSSE},
		{"legacy disabled", legacy.Disabled, true},
		{"orders max_in_flight", c.MaxInFlight("orders"), 16},
		{"search max_in_flight", c.MaxInFlight("search"), 100},
		{"orders failures", c.BreakerFailures("orders"), uint32(3)},
		{"orders open_for", c.BreakerOpenFor("orders"), 15 * time.Second},
		{"orders probes", c.BreakerHalfOpenProbes("orders"), uint32(1)},
		{"search failures", c.BreakerFailures("search"), uint32(10)},
		{"search open_for", c.BreakerOpenFor("search"), time.Minute},
		{"search probes", c.BreakerHalfOpenProbes("search"), uint32(2)},
		{"orders attempts", c.RetryMaxAttempts("orders"), 5},
		{"orders base", c.RetryBaseDelay("orders"), 50 * time.Millisecond},
		{"orders max", c.RetryMaxDelay("orders"), time.Second},
		{"search attempts", c.RetryMaxAttempts("search"), 2},
		{"search base", c.RetryBaseDelay("search"), 200 * time.Millisecond},
		{"search max", c.RetryMaxDelay("search"), 3 * time.Second},
		{"budget ratio", c.RetryBudgetRatio(), 0.1},
		{"budget min", c.RetryBudgetMinPerSecond(), 0.5},
		{"orders trusted", c.Trusted("orders"), true},
		{"search trusted", c.Trusted("search"), false},
		{"orders retry_safe", fmt.Sprint(c.ToolRetrySafe("orders", "get_order")), "true true"},
		{"refund not retry_safe", fmt.Sprint(c.ToolRetrySafe("orders", "refund_order")), "false true"},
		{"search unstated", fmt.Sprint(c.ToolRetrySafe("search", "q")), "false false"},
		{"PinningMode", c.PinningMode(), "strict"},
		{"PinsPath", c.PinsPath(), filepath.Join(dir, "state", "pins.json")},
		{"orders scan", c.DescriptionScanMode("orders"), "strip"},
		{"search scan", c.DescriptionScanMode("search"), "quarantine"},
	}
	for _, tt := range checks {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	_, err := Load(path)
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	if want := path + ": cannot read the config file: it does not exist"; ps.Error() != want {
		t.Fatalf("got %q, want %q", ps.Error(), want)
	}
}

// TestLoadReportsEveryProblem: three unrelated mistakes are all reported, in file order, one per line.
func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := Load("testdata/three_problems.yaml")
	if err == nil {
		t.Fatal("loaded")
	}
	want := []string{
		`testdata/three_problems.yaml:7: mcpServers.orders.timeout: expected a duration such as "8s", got "fast"`,
		`testdata/three_problems.yaml:10: mcpServers.search.max_result_bytes: expected a number of bytes from 1024 (1 KiB) to 67108864 (64 MiB), got 10`,
		`testdata/three_problems.yaml:12: mcpServers.search.tools.query.retries: unknown key; allowed keys here: max_result_bytes, override, retry_safe, timeout`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	if err == nil || err.Error() != dir+": cannot read the config file: is a directory" {
		t.Fatalf("got %v", err)
	}
}

// TestTags: !!str makes a number a string, as YAML specifies; standard tags are otherwise accepted.
func TestTags(t *testing.T) {
	c, err := Parse("", []byte("mcpServers:\n  s: !!map {command: x, args: [!!str 8080, !!str \"a\"], disabled: !!bool true}\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Servers["s"]; !slices.Equal(s.Args, []string{"8080", "a"}) || !s.Disabled || c.File != "" {
		t.Fatalf("got %+v, File %q", s, c.File)
	}
}

func TestValidWithoutServers(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "{}", "mcpServers:\n", "mcpServers: {}\n", "listen: {}\nlimits:\n"} {
		c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if len(c.Servers) != 0 {
			t.Errorf("%q: got servers %v", src, c.Servers)
		}
	}
}

// TestClaudeDesktopConfig: an operator can paste claude_desktop_config.json unchanged.
func TestClaudeDesktopConfig(t *testing.T) {
	data, err := os.ReadFile("testdata/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("claude_desktop_config.json", data, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	fs, remote := c.Servers["filesystem"], c.Servers["remote"]
	if fs.Transport != TransportStdio || fs.Command != "npx" || len(fs.Args) != 3 || fs.Env["NODE_ENV"] != "production" {
		t.Errorf("filesystem: %+v", fs)
	}
	if remote.Transport != TransportHTTP || remote.Headers["X-Api-Key"] != "none" {
		t.Errorf("remote: %+v", remote)
	}
}

func TestTransportResolution(t *testing.T) {
	tests := []struct {
		server string
		want   Transport
	}{
		{"{command: x}", TransportStdio},
		{"{command: x, type: stdio}", TransportStdio},
		{"{url: http://h/mcp}", TransportHTTP},
		{"{url: http://h/mcp, type: http}", TransportHTTP},
		{"{url: http://h/mcp, type: streamable-http}", TransportHTTP},
		{"{url: http://h/mcp, type: streamableHttp}", TransportHTTP},
		{"{url: https://h/sse, type: sse}", TransportSSE},
	}
	for _, tt := range tests {
		t.Run(tt.server, func(t *testing.T) {
			c, err := Parse("toolgate.yaml", []byte("mcpServers: {s: "+tt.server+"}"), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Servers["s"].Transport; got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRelativePaths: paths resolve against the config file's directory, never the working directory.
func TestRelativePaths(t *testing.T) {
	src := `
authz: {model: rbac/model.conf, policy: /etc/tg/policy.csv}
auth:
  resource: "https://gw.example.com/mcp"
  jwt: {issuer: "https://idp.example.com/", jwks_file: keys/jwks.json}
mcpServers:
  rel: {command: ./bin/orders, cwd: data}
  nested: {command: tools/search, cwd: /var/lib/search}
  bare: {command: npx}
  abs: {command: /usr/bin/orders}
`
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"relative model", c.ModelPath(), "/srv/tg/rbac/model.conf"},
		{"absolute policy", c.PolicyPath(), "/etc/tg/policy.csv"},
		{"./ command", c.Servers["rel"].Command, "/srv/tg/bin/orders"},
		{"relative cwd", c.Servers["rel"].Cwd, "/srv/tg/data"},
		{"command with /", c.Servers["nested"].Command, "/srv/tg/tools/search"},
		{"absolute cwd", c.Servers["nested"].Cwd, "/var/lib/search"},
		{"bare command stays for PATH", c.Servers["bare"].Command, "npx"},
		{"empty cwd stays empty", c.Servers["bare"].Cwd, ""},
		{"absolute command", c.Servers["abs"].Command, "/usr/bin/orders"},
		{"File", c.File, "/srv/tg/toolgate.yaml"},
		{"relative jwks_file", c.Auth.JWT.JWKSFile, "/srv/tg/keys/jwks.json"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	src := `
x-node: &node {command: node, env: {NODE_ENV: production}, timeout: 3s}
mcpServers:
  a: {<<: *node, args: [a.js]}
  b:
    <<: *node
    timeout: 4s
    args: [b.js]
`
	// x-node is not a toolgate key, so the anchor has to live somewhere allowed; check it is reported,
	// then load the same thing with the anchor on a server.
	if probs := parseProblems(t, src, nil); len(probs) != 1 || probs[0].Key != "x-node" {
		t.Fatalf("want only the unknown x-node key, got %v", probs)
	}
	src = `
mcpServers:
  a: &node {command: node, env: {NODE_ENV: production}, timeout: 3s, args: [a.js]}
  b:
    <<: *node
    timeout: 4s
    args: [b.js]
`
	c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	b := c.Servers["b"]
	if b.Command != "node" || b.Env["NODE_ENV"] != "production" || b.Args[0] != "b.js" || c.CallTimeout("b", "") != 4*time.Second {
		t.Fatalf("merge not applied, or explicit keys did not win: %+v", b)
	}
}

// TestAliasExpansionIsBounded: merge keys that each merge the previous level twice would take 2^30 steps
// to walk ("billion laughs"); the loader stops and says so instead.
func TestAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("mcpServers:\n  s0: &m0 {command: x}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "  s%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	probs := parseProblems(t, b.String(), nil)
	if len(probs) != 1 || !strings.Contains(probs[0].Msg, "more than 1000 alias expansions") {
		t.Fatalf("want one problem about alias expansions, got %v", probs)
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "toolgate.yaml", Line: 12, Key: "mcpServers.orders.timeout", Msg: `expected a duration such as "8s", got "fast"`},
			`toolgate.yaml:12: mcpServers.orders.timeout: expected a duration such as "8s", got "fast"`},
		{Problem{File: "toolgate.yaml", Key: "listen.http", Msg: "m"}, "toolgate.yaml: listen.http: m"},
		{Problem{File: "toolgate.yaml", Line: 3, Msg: "invalid YAML"}, "toolgate.yaml:3: invalid YAML"},
		{Problem{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestSchemaMatchesYAMLTags keeps the decoder's key tables and the documented yaml tags in step.
func TestSchemaMatchesYAMLTags(t *testing.T) {
	l := &loader{}
	tests := []struct {
		typ    any
		fields fields
	}{
		{Config{}, l.configFields(&Config{})},
		{Listen{}, l.listenFields(&Listen{})},
		{Authz{}, l.authzFields(&Authz{})},
		{Auth{}, l.authFields(&Auth{})},
		{APIKey{}, l.apiKeyFields(&APIKey{})},
		{JWT{}, l.jwtFields(&JWT{})},
		{Limits{}, l.limitsFields(&Limits{})},
		{Server{}, l.serverFields(&Server{})},
		{Tool{}, l.toolFields(&Tool{})},
		{ToolOverride{}, l.toolOverrideFields(&ToolOverride{})},
		{OverrideAnnotations{}, l.overrideAnnotationsFields(&OverrideAnnotations{})},
		{UpstreamAuth{}, l.upstreamAuthFields(&UpstreamAuth{})},
		{Breaker{}, l.breakerFields(&Breaker{})},
		{Retry{}, l.retryFields(&Retry{})},
		{RetryBudget{}, l.retryBudgetFields(&RetryBudget{})},
		{Pinning{}, l.pinningFields(&Pinning{})},
		{Admin{}, l.adminFields(&Admin{})},
		{Approvals{}, l.approvalsFields(&Approvals{})},
		{Audit{}, l.auditFields(&Audit{})},
		{State{}, l.stateFields(&State{})},
		{Redis{}, l.redisFields(&Redis{})},
		{Toolset{}, l.toolsetFields(&Toolset{})},
		{ToolsetRule{}, l.toolsetRuleFields(&ToolsetRule{})},
	}
	for _, tt := range tests {
		typ := reflect.TypeOf(tt.typ)
		var tags []string
		for f := range typ.Fields() {
			if tag := f.Tag.Get("yaml"); tag != "-" {
				tags = append(tags, tag)
			}
		}
		slices.Sort(tags)
		if got := keyList(tt.fields); got != strings.Join(tags, ", ") {
			t.Errorf("%s: decoder keys %s, yaml tags %s", typ.Name(), got, strings.Join(tags, ", "))
		}
	}
}
