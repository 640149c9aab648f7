package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestZeroConfigDefaults(t *testing.T) {
	var c Config
	tests := []struct {
		name      string
		got, want any
	}{
		{"HTTPAddr", c.HTTPAddr(), "127.0.0.1:8080"},
		{"MaxBodyBytes", c.MaxBodyBytes(), int64(4 << 20)},
		{"SessionIdleTTL", c.SessionIdleTTL(), 30 * time.Minute},
		{"StdioPrincipal", c.StdioPrincipal(), "local"},
		{"CallTimeout", c.CallTimeout("any", "tool"), 8 * time.Second},
		{"MaxResultBytes", c.MaxResultBytes("any", "tool"), int64(1 << 20)},
		{"InitTimeout", c.InitTimeout("any"), 10 * time.Second},
		{"ModelPath", c.ModelPath(), "model.conf"},
		{"PolicyPath", c.PolicyPath(), "policy.csv"},
		{"ServerNames", len(c.ServerNames()), 0},
		{"ToolPrefix", (&Server{Name: "orders"}).ToolPrefix(), "orders__"},
		{"HTTPLoopback", c.HTTPLoopback(), true},
		{"JWTAudience", c.JWTAudience(), ""},
		{"JWKSRefresh", c.JWKSRefresh(), 10 * time.Minute},
		{"JWTClockSkew", c.JWTClockSkew(), 60 * time.Second},
		{"JWTPrincipalClaim", c.JWTPrincipalClaim(), "sub"},
		{"JWTAlgorithms", strings.Join(c.JWTAlgorithms(), ","), "RS256,ES256,EdDSA"},
		{"PinningMode", c.PinningMode(), "tofu"},
		{"PinsPath", c.PinsPath(), "toolgate.pins.json"},
		{"DescriptionScanMode", c.DescriptionScanMode("any"), "strip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestEmptyFileMeansDefaults: a loaded file without settings behaves like the zero Config, except that
// the Casbin files are looked for beside it.
func TestEmptyFileMeansDefaults(t *testing.T) {
	c, err := Parse("/etc/toolgate/toolgate.yaml", nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr() != DefaultHTTPAddr || c.CallTimeout("x", "y") != DefaultCallTimeout {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c.ModelPath() != "/etc/toolgate/model.conf" || c.PolicyPath() != "/etc/toolgate/policy.csv" {
		t.Fatalf("authz files not beside the config: %s %s", c.ModelPath(), c.PolicyPath())
	}
}

func TestPrecedence(t *testing.T) {
	d := func(s string) Duration { v, _ := time.ParseDuration(s); return Duration(v) }
	c := Config{
		Limits: Limits{Timeout: d("5s"), MaxResultBytes: 5000, InitTimeout: d("20s")},
		Servers: map[string]*Server{
			"both": {Timeout: d("3s"), MaxResultBytes: 3000, InitTimeout: d("30s"), Tools: map[string]*Tool{
				"tool":     {Timeout: d("1s"), MaxResultBytes: 1000},
				"partial":  {MaxResultBytes: 1500},
				"nothing":  {},
				"nilentry": nil,
			}},
			"bare": {},
		},
	}
	tests := []struct {
		name         string
		cfg          *Config
		server, tool string
		timeout      time.Duration
		maxResult    int64
		init         time.Duration
	}{
		{"tool wins", &c, "both", "tool", time.Second, 1000, 30 * time.Second},
		{"tool sets one, server the other", &c, "both", "partial", 3 * time.Second, 1500, 30 * time.Second},
		{"empty tool falls to server", &c, "both", "nothing", 3 * time.Second, 3000, 30 * time.Second},
		{"nil tool falls to server", &c, "both", "nilentry", 3 * time.Second, 3000, 30 * time.Second},
		{"unknown tool falls to server", &c, "both", "other", 3 * time.Second, 3000, 30 * time.Second},
		{"bare server falls to limits", &c, "bare", "tool", 5 * time.Second, 5000, 20 * time.Second},
		{"unknown server falls to limits", &c, "nope", "tool", 5 * time.Second, 5000, 20 * time.Second},
		{"nothing set falls to defaults", &Config{}, "both", "tool", DefaultCallTimeout, DefaultMaxResultBytes, DefaultInitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.CallTimeout(tt.server, tt.tool); got != tt.timeout {
				t.Errorf("CallTimeout = %v, want %v", got, tt.timeout)
			}
			if got := tt.cfg.MaxResultBytes(tt.server, tt.tool); got != tt.maxResult {
				t.Errorf("MaxResultBytes = %v, want %v", got, tt.maxResult)
			}
			if got := tt.cfg.InitTimeout(tt.server); got != tt.init {
				t.Errorf("InitTimeout = %v, want %v", got, tt.init)
			}
		})
	}
}

func TestToolPrefix(t *testing.T) {
	empty, custom := "", "ord_"
	tests := []struct {
		name   string
		prefix *string
		want   string
	}{
		{"default", nil, "orders__"},
		{"unprefixed", &empty, ""},
		{"custom", &custom, "ord_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Server{Name: "orders", Prefix: tt.prefix}).ToolPrefix(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServerNamesSorted(t *testing.T) {
	c := Config{Servers: map[string]*Server{"b": {}, "a": {Disabled: true}, "c": {}}}
	if got := c.ServerNames(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v", got)
	}
}
