package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// approvalsProblems are the TestProblems cases of admin and approvals.
var approvalsProblems = []problemCase{
	{"admin listen malformed", "admin: {listen: \"8081\"}\n", nil, 1, "admin.listen", `expected host:port such as "127.0.0.1:8080", got "8081"`},
	{"admin listen bad port", "admin: {listen: \"127.0.0.1:99999\"}\n", nil, 1, "admin.listen", `expected a port number from 0 to 65535`},
	{"admin listen on the network without a key", "admin:\n  listen: \"0.0.0.0:8081\"\n", nil, 2, "admin.listen",
		"0.0.0.0:8081 is reachable from the network but admin.key_sha256 is not set"},
	{"admin listen on every interface without a key", "admin: {listen: \":8081\"}\n", nil, 1, "admin.listen", "admin.key_sha256 is not set"},
	{"admin listen same as listen.http", "admin: {listen: \"127.0.0.1:8080\"}\n", nil, 1, "admin.listen",
		"expected an address other than listen.http (127.0.0.1:8080)"},
	{"admin key not hex", "admin:\n  key_sha256: tg_live_secret\n", nil, 2, "admin.key_sha256", "expected 64 hex characters (the SHA-256 of the admin key, not the key"},
	{"admin key a number", "admin: {key_sha256: 12}\n", nil, 1, "admin.key_sha256", "expected a string, got the number 12"},
	{"unknown admin key", "admin: {port: 8081}\n", nil, 1, "admin.port", "unknown key; allowed keys here: key_sha256, listen"},
	{"admin not a mapping", "admin: yes\n", nil, 1, "admin", "expected a mapping with keys key_sha256, listen"},
	{"approvals ttl too short", "approvals: {ttl: 30s}\n", nil, 1, "approvals.ttl", "expected a duration from 1m to 720h, got 30s"},
	{"approvals ttl too long", "approvals:\n  ttl: 1000h\n", nil, 2, "approvals.ttl", "expected a duration from 1m to 720h, got 1000h"},
	{"approvals ttl a number", "approvals: {ttl: 60}\n", nil, 1, "approvals.ttl", `got the number 60 (write "60s" or another unit)`},
	{"approvals file a directory", "approvals: {file: \"state/\"}\n", nil, 1, "approvals.file", `expected a file, got the directory "state/"`},
	{"approvals file with spaces", "approvals: {file: \"a.json \"}\n", nil, 1, "approvals.file", "without leading or trailing spaces"},
	{"unknown approvals key", "approvals: {expiry: 1h}\n", nil, 1, "approvals.expiry", "unknown key; allowed keys here: file, rules, ttl"},
}

func TestAdminKeyNotEchoed(t *testing.T) {
	probs := parseProblems(t, "admin: {key_sha256: tg_live_secret}\n", nil)
	if len(probs) != 1 || strings.Contains(probs[0].String(), "tg_live_secret") {
		t.Errorf("problems %v echo the key", probs)
	}
}

func TestApprovalsSettings(t *testing.T) {
	const key = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
	tests := []struct {
		name      string
		src       string
		addr, key string
		path      string
		ttl       time.Duration
	}{
		{"defaults", "", "127.0.0.1:8081", "", "/srv/tg/toolgate.approvals.json", time.Hour},
		{"all set", "admin: {listen: \"localhost:9000\", key_sha256: \"" + key + "\"}\napprovals: {file: state/a.json, ttl: 30m}\n",
			"localhost:9000", strings.ToLower(key), "/srv/tg/state/a.json", 30 * time.Minute},
		{"network listener with a key", "admin: {listen: \"0.0.0.0:8081\", key_sha256: \"" + hashA + "\"}\n",
			"0.0.0.0:8081", hashA, "/srv/tg/toolgate.approvals.json", time.Hour},
		{"absolute file, bounds of ttl", "approvals: {file: /var/lib/tg/a.json, ttl: 720h}\n",
			"127.0.0.1:8081", "", "/var/lib/tg/a.json", 720 * time.Hour},
		{"minimum ttl, variable in file", "approvals: {file: \"${STATE}/a.json\", ttl: 1m}\n",
			"127.0.0.1:8081", "", "/state/a.json", time.Minute},
		{"admin and listen.http both on a free port", "listen: {http: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\"}\n",
			"127.0.0.1:0", "", "/srv/tg/toolgate.approvals.json", time.Hour},
		{"admin moved off the MCP default", "listen: {http: \"127.0.0.1:8081\"}\nadmin: {listen: \"127.0.0.1:8082\"}\n",
			"127.0.0.1:8082", "", "/srv/tg/toolgate.approvals.json", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/srv/tg/toolgate.yaml", []byte(tt.src), envOf(map[string]string{"STATE": "/state"}))
			if err != nil {
				t.Fatal(err)
			}
			if c.AdminAddr() != tt.addr || c.AdminKeySHA256() != tt.key || c.ApprovalsPath() != filepath.FromSlash(tt.path) || c.ApprovalTTL() != tt.ttl {
				t.Errorf("got %q %q %q %s, want %q %q %q %s", c.AdminAddr(), c.AdminKeySHA256(), c.ApprovalsPath(), c.ApprovalTTL(),
					tt.addr, tt.key, tt.path, tt.ttl)
			}
		})
	}
}

func TestApprovalsZeroConfig(t *testing.T) {
	var c Config
	if c.AdminAddr() != DefaultAdminAddr || c.AdminKeySHA256() != "" || c.ApprovalsPath() != DefaultApprovalsFile || c.ApprovalTTL() != time.Hour {
		t.Errorf("zero Config: %q %q %q %s", c.AdminAddr(), c.AdminKeySHA256(), c.ApprovalsPath(), c.ApprovalTTL())
	}
}
