package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/toolgate/toolgate/redact"
)

// Redaction is the redaction block (docs/configuration.md, "Redaction"): secrets in what upstreams send
// (results, error text, stderr) are replaced before a client, the log or the audit trail sees them. On by
// default with the default patterns of package redact. Not to be confused with audit.redact, which names
// argument fields the audit trail leaves out.
type Redaction struct {
	Disabled bool               `yaml:"disabled"` // true: no redaction at all
	Disable  []string           `yaml:"disable"`  // default patterns not applied, by name (redact.DefaultNames)
	Patterns []RedactionPattern `yaml:"patterns"` // applied after the defaults
}

// RedactionPattern is one configured kind of secret (redact.Pattern).
type RedactionPattern struct {
	Name     string   `yaml:"name"`     // [a-z0-9_]{1,40}: the metric label and the replacement's name
	Regex    string   `yaml:"regex"`    // RE2; a group named secret limits what is replaced
	Keywords []string `yaml:"keywords"` // literal strings every match contains; default: the regex's literal prefix
}

func (l *loader) redactionFields(x *Redaction) fields {
	return fields{
		"disabled": set(&x.Disabled, l.boolean),
		"disable":  set(&x.Disable, l.strList),
		"patterns": func(n ast.Node, p string) {
			x.Patterns = objectList(l, n, p, "{name, regex, keywords}", func(r *RedactionPattern) fields {
				return fields{"name": set(&r.Name, l.str), "regex": set(&r.Regex, l.str), "keywords": set(&r.Keywords, l.strList)}
			})
		},
	}
}

// RedactPatterns is redaction.patterns as package redact takes them.
func (c *Config) RedactPatterns() []redact.Pattern {
	out := make([]redact.Pattern, len(c.Redaction.Patterns))
	for i, p := range c.Redaction.Patterns {
		out[i] = redact.Pattern{Name: p.Name, Regexp: p.Regex, Keywords: p.Keywords}
	}
	return out
}

// checkRedaction checks that every disabled name is a default pattern and every pattern compiles, has a
// name of its own and cannot match everywhere.
func (l *loader) checkRedaction(x *Redaction) {
	defaults := redact.DefaultNames()
	for i, name := range x.Disable {
		if !slices.Contains(defaults, name) && !l.bad[index("redaction.disable", i)] {
			l.reportAt(index("redaction.disable", i), "expected the name of a default pattern (%s), got %q", strings.Join(defaults, ", "), name)
		}
	}
	seen := map[string]string{}
	for _, name := range defaults {
		seen[name] = "a default pattern"
	}
	for i, p := range x.Patterns {
		path := index("redaction.patterns", i)
		switch {
		case p.Regex == "" && !l.bad[path+".regex"]:
			l.reportAt(path, "regex is required: the RE2 expression that matches the secret")
		case p.Name != "" && seen[p.Name] != "":
			l.reportAt(path+".name", "%q is already the name of %s", p.Name, seen[p.Name])
		default:
			if err := redact.Check(redact.Pattern{Name: p.Name, Regexp: p.Regex, Keywords: p.Keywords}); err != nil {
				l.reportAt(path, "%s", strings.TrimPrefix(err.Error(), "redact: "))
			}
		}
		if p.Name != "" && seen[p.Name] == "" {
			seen[p.Name] = fmt.Sprintf("redaction.patterns[%d]", i)
		}
	}
}
