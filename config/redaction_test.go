package config

import (
	"strings"
	"testing"
)

var redactionProblems = []problemCase{
	{"unknown default", "redaction:\n  disable: [jwt, jwts]\n", nil, 2, "redaction.disable[1]",
		`expected the name of a default pattern (private_key, jwt, aws_access_key`},
	{"pattern without regex", "redaction:\n  patterns:\n    - {name: acme}\n", nil, 3, "redaction.patterns[0]", "regex is required"},
	{"regex does not compile", "redaction:\n  patterns:\n    - {name: acme, regex: \"acme_(\"}\n", nil, 3, "redaction.patterns[0]",
		"pattern acme: error parsing regexp: missing closing )"},
	{"regex matches everything", "redaction:\n  patterns:\n    - {name: acme, regex: \"x*\"}\n", nil, 3, "redaction.patterns[0]",
		"pattern acme matches the empty string, so it would match everywhere"},
	{"bad name", "redaction:\n  patterns:\n    - {name: Acme Key, regex: \"acme_[a-z]{8}\"}\n", nil, 3, "redaction.patterns[0]",
		`a pattern name is 1 to 40 of a-z 0-9 _, got "Acme Key"`},
	{"name of a default", "redaction:\n  patterns:\n    - {name: jwt, regex: \"acme_[a-z]{8}\"}\n", nil, 3, "redaction.patterns[0].name",
		`"jwt" is already the name of a default pattern`},
	{"name twice", "redaction:\n  patterns:\n    - {name: acme, regex: \"acme_[a-z]{8}\"}\n    - {name: acme, regex: \"acme2_[a-z]{8}\"}\n", nil, 4,
		"redaction.patterns[1].name", `"acme" is already the name of redaction.patterns[0]`},
	{"empty keyword", "redaction:\n  patterns:\n    - {name: acme, regex: \"[a-z]{8}\", keywords: [\"\"]}\n", nil, 3, "redaction.patterns[0]",
		"empty keyword"},
	{"unknown key", "redaction:\n  pattern: []\n", nil, 2, "redaction.pattern", `unknown key; allowed keys here: disable, disabled, patterns (did you mean "patterns"?)`},
}

func TestRedactionProblems(t *testing.T) {
	for _, tt := range redactionProblems {
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
		})
	}
}

func TestRedactionLoads(t *testing.T) {
	src := "redaction:\n  disable: [basic_auth]\n  patterns:\n    - {name: acme_token, regex: \"acme_[A-Za-z0-9]{32}\", keywords: [acme_]}\n"
	c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	ps := c.RedactPatterns()
	if c.Redaction.Disabled || len(c.Redaction.Disable) != 1 || len(ps) != 1 || ps[0].Name != "acme_token" || ps[0].Keywords[0] != "acme_" {
		t.Fatalf("loaded %+v, patterns %+v", c.Redaction, ps)
	}
}
