package config

import (
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
			`unknown key; allowed keys here: model, policy, refuse_deny_removal (did you mean "refuse_deny_removal"?)`},
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
