package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthzRefuseDenyRemoval: authz.refuse_deny_removal is a boolean, false by default.
func TestAuthzRefuseDenyRemoval(t *testing.T) {
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	for _, tt := range []struct {
		src  string
		want bool
	}{
		{stdio, false},
		{stdio + "authz: {refuse_deny_removal: true}\n", true},
		{stdio + "authz:\n  policy: policy.csv\n  refuse_deny_removal: false\n", false},
	} {
		c, err := Parse("toolgate.yaml", []byte(tt.src), envOf(nil))
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		if got := c.RefuseDenyRemoval(); got != tt.want {
			t.Errorf("%q: RefuseDenyRemoval() = %v, want %v", tt.src, got, tt.want)
		}
	}
	for _, tt := range []problemCase{
		{"a string", stdio + "authz: {refuse_deny_removal: \"yes\"}\n", nil, 4, "authz.refuse_deny_removal", `expected true or false, got the string "yes"`},
		{"a number", stdio + "authz:\n  refuse_deny_removal: 1\n", nil, 5, "authz.refuse_deny_removal", "expected true or false, got the number 1"},
		{"misspelt", stdio + "authz: {refuse_deny_removals: true}\n", nil, 4, "authz.refuse_deny_removals",
			`unknown key; allowed keys here: model, policy, refuse_deny_removal, shadow_policy (did you mean "refuse_deny_removal"?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) || !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant prefix %s and %s", got, want, tt.want)
			}
		})
	}
}

// TestAuthzShadowPolicy: authz.shadow_policy is relative to the config file and must name a file
// that exists and is not authz.policy; a problem names the file, line, key and what was expected.
func TestAuthzShadowPolicy(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(filepath.Join(dir, "candidate.csv"), []byte("p, a, orders/*, call, allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.csv"), []byte("p, a, orders/*, call, allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	c, err := Parse(cfgPath, []byte(stdio+"authz: {shadow_policy: candidate.csv}\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ShadowPolicyPath(), filepath.Join(dir, "candidate.csv"); got != want {
		t.Errorf("ShadowPolicyPath() = %q, want %q", got, want)
	}
	if c, err := Parse(cfgPath, []byte(stdio), envOf(nil)); err != nil || c.ShadowPolicyPath() != "" {
		t.Errorf("without the key: %v, %q", err, c.ShadowPolicyPath())
	}
	for _, tt := range []struct{ name, value, want string }{
		{"missing", "nope.csv", "expected a candidate policy file, got " + filepath.Join(dir, "nope.csv") + ", which does not exist"},
		{"a directory", "adir", "which is a directory"},
		{"the live policy", "policy.csv", "expected a candidate policy file other than the live one (authz.policy)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(cfgPath, []byte(stdio+"authz:\n  shadow_policy: "+tt.value+"\n"), envOf(nil))
			if err == nil || !strings.HasPrefix(err.Error(), cfgPath+":5: authz.shadow_policy: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %s:5: authz.shadow_policy: ... %s", err, cfgPath, tt.want)
			}
		})
	}
}
