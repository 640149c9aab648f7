package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auditProblems are the TestProblems cases of audit.
var auditProblems = []problemCase{
	{"audit fsync unknown", "audit:\n  fsync: sometimes\n", nil, 2, "audit.fsync", `expected one of always, interval, never, got "sometimes"`},
	{"audit fsync a boolean", "audit: {fsync: true}\n", nil, 1, "audit.fsync", "expected a string, got the boolean true"},
	{"audit fsync_interval too short", "audit: {fsync: interval, fsync_interval: 1ms}\n", nil, 1, "audit.fsync_interval",
		"expected a duration from 10ms to 1m, got 1ms"},
	{"audit fsync_interval too long", "audit: {fsync: interval, fsync_interval: 2m}\n", nil, 1, "audit.fsync_interval",
		"expected a duration from 10ms to 1m, got 2m"},
	{"audit fsync_interval a number", "audit: {fsync: interval, fsync_interval: 5}\n", nil, 1, "audit.fsync_interval",
		`got the number 5 (write "5s" or another unit)`},
	{"audit fsync_interval with fsync always", "audit:\n  fsync: always\n  fsync_interval: 2s\n", nil, 3, "audit.fsync_interval",
		"applies only with fsync: interval (fsync is always)"},
	{"audit fsync_interval with never", "audit: {fsync: never, fsync_interval: 2s}\n", nil, 1, "audit.fsync_interval",
		"applies only with fsync: interval (fsync is never)"},
	{"audit max_bytes too small", "audit: {max_bytes: 1000}\n", nil, 1, "audit.max_bytes",
		"expected a number of bytes from 1048576 (1 MiB) to 17179869184 (16384 MiB), got 1000"},
	{"audit max_bytes too large", "audit:\n  max_bytes: 17179869185\n", nil, 2, "audit.max_bytes", "got 17179869185"},
	{"audit max_bytes negative", "audit: {max_bytes: -1}\n", nil, 1, "audit.max_bytes", "got -1"},
	{"audit max_bytes a string", "audit: {max_bytes: 100MiB}\n", nil, 1, "audit.max_bytes", `expected an integer number of bytes such as 1048576, got the string "100MiB"`},
	{"audit max_files zero is the default, negative is not", "audit: {max_files: -1}\n", nil, 1, "audit.max_files",
		"expected a whole number from 1 to 1000, got -1"},
	{"audit max_files too many", "audit: {max_files: 1001}\n", nil, 1, "audit.max_files", "got 1001"},
	{"audit include_args a string", "audit: {include_args: \"yes\"}\n", nil, 1, "audit.include_args", `expected true or false, got the string "yes"`},
	{"audit fail_closed a number", "audit: {fail_closed: 1}\n", nil, 1, "audit.fail_closed", "expected true or false, got the number 1"},
	{"audit disabled a string", "audit: {disabled: off}\n", nil, 1, "audit.disabled", `expected true or false, got the string "off"`},
	{"audit redact not a list", "audit: {redact: password}\n", nil, 1, "audit.redact", `expected a list of strings, got the string "password"`},
	{"audit redact empty part", "audit:\n  redact:\n    - password\n    - card..number\n", nil, 4, "audit.redact[1]",
		`expected a field name or a dotted path such as "card.number", got "card..number"`},
	{"audit redact trailing dot", "audit: {redact: [\"card.\"]}\n", nil, 1, "audit.redact[0]", `got "card."`},
	{"audit redact empty", "audit: {redact: [\"\"]}\n", nil, 1, "audit.redact[0]", `got ""`},
	{"audit redact spaces", "audit: {redact: [\"card. number\"]}\n", nil, 1, "audit.redact[0]", `got "card. number"`},
	{"audit redact twice", "audit:\n  redact: [a, b, a]\n", nil, 2, "audit.redact[2]", `"a" is listed twice (also at audit.redact[0])`},
	{"audit file a directory", "audit: {file: \"logs/\"}\n", nil, 1, "audit.file", `expected a file, got the directory "logs/"`},
	{"audit file with spaces", "audit: {file: \"a.log \"}\n", nil, 1, "audit.file", "without leading or trailing spaces"},
	{"unknown audit key", "audit: {rotate: 10}\n", nil, 1, "audit.rotate",
		"unknown key; allowed keys here: disabled, fail_closed, file, fsync, fsync_interval, include_args, max_bytes, max_files, redact"},
	{"misspelt audit key", "audit: {max_file: 3}\n", nil, 1, "audit.max_file", `(did you mean "max_files"?)`},
	{"audit not a mapping", "audit: true\n", nil, 1, "audit", "expected a mapping with keys disabled, fail_closed, file"},
}

func TestAuditSettings(t *testing.T) {
	type settings struct {
		enabled     bool
		path, fsync string
		interval    time.Duration
		maxBytes    int64
		maxFiles    int
		args        bool
		redact      string // joined with ","
		failClosed  bool
	}
	defaults := settings{true, "/srv/tg/toolgate.audit.log", "interval", time.Second, 100 << 20, 10, false, "", false}
	tests := []struct {
		name string
		src  string
		want settings
	}{
		{"defaults", "", defaults},
		{"empty section", "audit:\n", defaults},
		{"all set", "audit:\n  file: logs/audit.jsonl\n  fsync: interval\n  fsync_interval: 250ms\n  max_bytes: 1048576\n" +
			"  max_files: 1000\n  include_args: true\n  redact: [password, card.number]\n  fail_closed: true\n",
			settings{true, "/srv/tg/logs/audit.jsonl", "interval", 250 * time.Millisecond, 1 << 20, 1000, true,
				"password,card.number", true}},
		{"absolute file, never, upper bounds", "audit: {file: /var/log/tg/audit.log, fsync: never, max_bytes: 17179869184, max_files: 1}\n",
			settings{true, "/var/log/tg/audit.log", "never", time.Second, 16 << 30, 1, false, "", false}},
		{"variable in file", "audit: {file: \"${LOGS}/audit.log\"}\n",
			settings{true, "/logs/audit.log", "interval", time.Second, 100 << 20, 10, false, "", false}},
		{"redact without include_args", "audit: {redact: [token]}\n",
			settings{true, "/srv/tg/toolgate.audit.log", "interval", time.Second, 100 << 20, 10, false, "token", false}},
		{"disabled", "audit: {disabled: true}\n",
			settings{false, "/srv/tg/toolgate.audit.log", "interval", time.Second, 100 << 20, 10, false, "", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/srv/tg/toolgate.yaml", []byte(tt.src), envOf(map[string]string{"LOGS": "/logs"}))
			if err != nil {
				t.Fatal(err)
			}
			got := settings{c.AuditEnabled(), c.AuditPath(), c.AuditFsync(), c.AuditFsyncInterval(), c.AuditMaxBytes(),
				c.AuditMaxFiles(), c.AuditIncludeArgs(), strings.Join(c.AuditRedact(), ","), c.AuditFailClosed()}
			want := tt.want
			want.path = filepath.FromSlash(want.path)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestAuditZeroConfig(t *testing.T) {
	var c Config
	if !c.AuditEnabled() || c.AuditPath() != DefaultAuditFile || c.AuditFsync() != AuditFsyncInterval ||
		c.AuditFsyncInterval() != time.Second || c.AuditMaxBytes() != 100<<20 || c.AuditMaxFiles() != 10 ||
		c.AuditIncludeArgs() || len(c.AuditRedact()) != 0 || c.AuditFailClosed() {
		t.Errorf("zero Config: %v %q %q %s %d %d %v %v %v", c.AuditEnabled(), c.AuditPath(), c.AuditFsync(),
			c.AuditFsyncInterval(), c.AuditMaxBytes(), c.AuditMaxFiles(), c.AuditIncludeArgs(), c.AuditRedact(),
			c.AuditFailClosed())
	}
	c.Audit.Redact = []string{"a"}
	c.AuditRedact()[0] = "b"
	if c.Audit.Redact[0] != "a" {
		t.Error("AuditRedact returns the config's own slice")
	}
}
