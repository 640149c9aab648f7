package config

import (
	"strings"
	"testing"
	"time"
)

const hashB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

// consoleProblems are problems of the console section: each must be the only problem reported, at its
// line and key, never echoing a key.
var consoleProblems = []problemCase{
	{"approvers not a list", "console: {approvers: carol}\n", nil, 1, "console.approvers", "expected a list of {name, sha256} mappings"},
	{"approver without a name", "console:\n  approvers:\n    - {sha256: \"" + hashA + "\"}\n", nil, 3, "console.approvers[0]", "name is required"},
	{"approver without a key", "console:\n  approvers:\n    - {name: carol}\n", nil, 3, "console.approvers[0]", "sha256 is required"},
	{"approver key not a hash", "console:\n  approvers:\n    - {name: carol, sha256: tga_secret}\n", nil, 3, "console.approvers[0].sha256",
		"expected 64 hex characters (the SHA-256 of the sign-in key, not the key), got 10 characters"},
	{"approver name with a comma", "console:\n  approvers:\n    - {name: \"a,b\", sha256: \"" + hashA + "\"}\n", nil, 3, "console.approvers[0].name", `without "$" or ","`},
	{"approver listed twice", "console:\n  approvers:\n    - {name: carol, sha256: \"" + hashA + "\"}\n    - {name: carol, sha256: \"" + hashB + "\"}\n",
		nil, 4, "console.approvers[1].name", "same name as console.approvers[0] (line 3)"},
	{"two approvers share a key", "console:\n  approvers:\n    - {name: carol, sha256: \"" + hashA + "\"}\n    - {name: dan, sha256: \"" + strings.ToUpper(hashA) + "\"}\n",
		nil, 4, "console.approvers[1].sha256", "same key hash as console.approvers[0] (line 3)"},
	{"approver key is an API key", "auth:\n  api_keys:\n    - {principal: alice, sha256: \"" + hashA + "\"}\nconsole:\n  approvers:\n    - {name: carol, sha256: \"" + hashA + "\"}\n",
		nil, 6, "console.approvers[0].sha256", "same key hash as auth.api_keys[0]; an approver's sign-in key must be a key of its own"},
	{"approver key is the admin key", "admin: {key_sha256: \"" + hashA + "\"}\nconsole:\n  approvers:\n    - {name: carol, sha256: \"" + hashA + "\"}\n",
		nil, 4, "console.approvers[0].sha256", "same key hash as admin.key_sha256"},
	{"session ttl too short", "console: {session_ttl: 10s}\n", nil, 1, "console.session_ttl", "expected a duration from 1m to 168h"},
	{"unknown console key", "console: {users: []}\n", nil, 1, "console.users", "unknown key; allowed keys here: approvers, oidc, public_url, session_ttl"},
	{"unknown approver key", "console:\n  approvers:\n    - {name: carol, sha256: \"" + hashA + "\", key: x}\n", nil, 3, "console.approvers[0].key",
		"unknown key; allowed keys here: name, sha256"},
}

func TestConsoleProblems(t *testing.T) {
	for _, tt := range consoleProblems {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) {
				t.Errorf("got  %s\nwant prefix %s", got, want)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant it to contain %s", got, tt.want)
			}
			if strings.Contains(got, "tga_secret") {
				t.Errorf("the problem echoes the key: %s", got)
			}
		})
	}
}

func TestConsoleSettings(t *testing.T) {
	var zero Config
	if zero.ConsoleEnabled() || zero.ConsoleSessionTTL() != DefaultConsoleSessionTTL || len(zero.ConsoleApprovers()) != 0 {
		t.Errorf("zero Config: enabled %v, ttl %s", zero.ConsoleEnabled(), zero.ConsoleSessionTTL())
	}
	src := "console:\n  session_ttl: 2h\n  approvers:\n    - {name: carol, sha256: \"" + strings.ToUpper(hashA) + "\"}\n    - {name: dan, sha256: \"" + hashB + "\"}\n"
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []Approver{{Name: "carol", SHA256: hashA}, {Name: "dan", SHA256: hashB}}
	if !c.ConsoleEnabled() || c.ConsoleSessionTTL() != 2*time.Hour || len(c.ConsoleApprovers()) != 2 ||
		c.ConsoleApprovers()[0] != want[0] || c.ConsoleApprovers()[1] != want[1] {
		t.Errorf("got enabled %v, ttl %s, approvers %+v; want true, 2h, %+v", c.ConsoleEnabled(), c.ConsoleSessionTTL(), c.ConsoleApprovers(), want)
	}
}
