package upstreams

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func listed(names ...string) []Listed {
	var out []Listed
	for _, n := range names {
		out = append(out, Listed{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return out
}

// servers lists s sorted by name, as the gateway orders its servers.
func servers(s ...*Server) []Server {
	out := make([]Server, len(s))
	for i, srv := range s {
		out[i] = *srv
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func TestCatalogNaming(t *testing.T) {
	cfg := servers(
		&Server{Name: "orders", ToolPrefix: "orders__"},
		&Server{Name: "files"},
		&Server{Name: "web", ToolPrefix: "w_"},
	)
	cat, err := Build(cfg, map[string][]Listed{
		"orders": listed("get_order"), "files": listed("read_file"), "web": listed("fetch"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, id, upstream string }{
		{"orders__get_order", "orders/get_order", "get_order"},
		{"read_file", "files/read_file", "read_file"},
		{"w_fetch", "web/fetch", "fetch"},
	}
	for _, c := range cases {
		tool, ok := cat.Resolve(c.name)
		if !ok || tool.ID != c.id || tool.Upstream != c.upstream || tool.Unreachable {
			t.Errorf("Resolve(%q) = %+v, %v; want id %s", c.name, tool, ok, c.id)
		}
	}
	if _, ok := cat.Resolve("get_order"); ok {
		t.Error("a prefixed tool resolved by its bare name")
	}
	if len(cat.Tools()) != 3 || cat.Tools()[0].Name > cat.Tools()[1].Name {
		t.Errorf("tools not sorted or missing: %d", len(cat.Tools()))
	}
}

// A name claimed twice quarantines every claimant (never shadowing), and
// the other tools, even of the same servers, stay callable.
func TestCatalogCollisionQuarantinesClaimants(t *testing.T) {
	cfg := servers(&Server{Name: "a"}, &Server{Name: "b"})
	cat, err := Build(cfg, map[string][]Listed{"a": listed("search", "only_a"), "b": listed("search", "dup", "dup")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"search", "dup"} {
		if _, ok := cat.Resolve(gone); ok {
			t.Errorf("%q is callable despite the collision", gone)
		}
	}
	if _, ok := cat.Resolve("only_a"); !ok {
		t.Error("an innocent tool was dropped")
	}
	var reasons []string
	for _, q := range cat.Quarantined() {
		reasons = append(reasons, q.Server+"/"+q.Upstream+": "+q.Reason)
	}
	joined := strings.Join(reasons, "\n")
	if len(reasons) != 4 || !strings.Contains(joined, "a/search and b/search") || !strings.Contains(joined, "b/dup and b/dup") {
		t.Fatalf("quarantine reasons:\n%s", joined)
	}
}

func TestCatalogSanitisesDescriptions(t *testing.T) {
	cat, err := Build(servers(&Server{Name: "s", ToolPrefix: "s__"}), map[string][]Listed{"s": {{Name: "t",
		Title: "T\x1b]0;PWNED\x07", Description: "d\x1b[2Jesc", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := cat.Resolve("s__t")
	if tool.Title != "T" || tool.Description != "desc" {
		t.Fatalf("title %q description %q", tool.Title, tool.Description)
	}
}

func TestCatalogQuarantinesBadNamesAndSchemas(t *testing.T) {
	cfg := servers(&Server{Name: "s", ToolPrefix: "s__"})
	tools := listed("ok", "has space", "dots.not.allowed", strings.Repeat("x", 62))
	tools = append(tools,
		Listed{Name: "remote", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/x.json"}}}`)},
		Listed{Name: "badout", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)},
	)
	cat, err := Build(cfg, map[string][]Listed{"s": tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Tools()) != 1 || cat.Tools()[0].Name != "s__ok" {
		t.Fatalf("callable tools %v, want only s__ok", cat.Tools())
	}
	reasons := map[string]string{}
	for _, q := range cat.Quarantined() {
		reasons[q.Upstream] = q.Reason
	}
	for name, want := range map[string]string{
		"has space": "must match", "dots.not.allowed": "must match", strings.Repeat("x", 62): "must match",
		"remote": "input schema", "badout": "output schema",
	} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%q: reason %q lacks %q", name, reasons[name], want)
		}
	}
}

func TestCatalogDownServerStandIn(t *testing.T) {
	cfg := servers(&Server{Name: "up", ToolPrefix: "up__"}, &Server{Name: "down", ToolPrefix: "down__"}, &Server{Name: "bare"})
	cat, err := Build(cfg, map[string][]Listed{"up": listed("x")}, map[string]string{"down": "exit status 3", "bare": "refused"})
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cat.Resolve("down__anything")
	if !ok || !tool.Unreachable || tool.ID != "down/anything" || tool.Server != "down" {
		t.Fatalf("stand-in %+v, %v", tool, ok)
	}
	if _, ok := cat.Resolve("nothing_here"); ok {
		t.Error("an unprefixed down server captured an unknown name")
	}
	if cat.Down()["down"] != "exit status 3" {
		t.Errorf("down reasons %v", cat.Down())
	}
}

func TestCatalogLimitsFromConfig(t *testing.T) {
	cfg := servers(&Server{Name: "s", ToolPrefix: "s__", CallTimeout: 2 * time.Second, MaxResultBytes: 1 << 20,
		Tools: map[string]ToolLimits{"slow": {Timeout: 30 * time.Second, MaxResultBytes: 4096}, "capped": {MaxResultBytes: 512}}})
	cat, err := Build(cfg, map[string][]Listed{"s": listed("fast", "slow", "capped")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := cat.Resolve("s__fast")
	slow, _ := cat.Resolve("s__slow")
	capped, _ := cat.Resolve("s__capped")
	if fast.Timeout.Seconds() != 2 || slow.Timeout.Seconds() != 30 || slow.MaxResultBytes != 4096 || fast.MaxResultBytes != 1<<20 ||
		capped.Timeout.Seconds() != 2 || capped.MaxResultBytes != 512 {
		t.Errorf("limits: fast %v/%d slow %v/%d capped %v/%d", fast.Timeout, fast.MaxResultBytes, slow.Timeout, slow.MaxResultBytes,
			capped.Timeout, capped.MaxResultBytes)
	}
}

func TestChildEnvAllowlist(t *testing.T) {
	parent := []string{"PATH=/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=s3cr3t", "LC_ALL=C", "TOOLGATE_KEY=k", "LANG=en"}
	env := childEnv(parent, map[string]string{"LANG": "uk_UA", "API_TOKEN": "t"})
	got := strings.Join(env, " ")
	for _, want := range []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "LANG=uk_UA", "API_TOKEN=t"} {
		if !strings.Contains(got, want) {
			t.Errorf("child env lacks %s: %s", want, got)
		}
	}
	for _, leak := range []string{"AWS_SECRET", "TOOLGATE_KEY", "LANG=en"} {
		if strings.Contains(got, leak) {
			t.Errorf("child env has %s: %s", leak, got)
		}
	}
}

// An upstream tool whose client-facing name would be one of the gateway's
// discovery tools is quarantined: a server named toolgate with the
// default prefix, and an unprefixed one that lists the name itself.
func TestCatalogQuarantinesReservedNames(t *testing.T) {
	cfg := servers(&Server{Name: "toolgate", ToolPrefix: "toolgate__"}, &Server{Name: "bare"})
	cat, err := Build(cfg, map[string][]Listed{"toolgate": listed("search_tools", "other"), "bare": listed("toolgate__call_tool")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ReservedToolNames {
		if _, ok := cat.Resolve(name); ok {
			t.Errorf("%s resolves to an upstream tool", name)
		}
	}
	if _, ok := cat.Resolve("toolgate__other"); !ok {
		t.Error("an innocent tool of the same server was dropped")
	}
	if q := cat.Quarantined(); len(q) != 2 || !strings.Contains(q[0].Reason, "is the gateway's own discovery tool") {
		t.Errorf("quarantined %+v", q)
	}
}
