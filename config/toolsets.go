package config

import (
	"path"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Toolset is a named set of tools a request may be given (toolsets.<name>; docs/configuration.md,
// "Toolsets and discovery"): what its clients see and may call, within what the policy allows.
type Toolset struct {
	// Tools are patterns over the canonical <server>/<tool> ("orders/*", "*/read_*"; * and ? never cross
	// the /); a tool is in the set when one matches it and no Exclude pattern does. At least one.
	Tools   []string `yaml:"tools"`
	Exclude []string `yaml:"exclude"`
	// Discovery lists two meta-tools (search the toolset, call a tool by name) instead of its tools.
	Discovery bool `yaml:"discovery"`
}

// ToolsetRule picks a toolset for the requests it matches (toolset_rules, in order: the first match
// wins; no match: no toolset, every tool the policy allows). Every key written must match; the values
// are patterns as in Toolset.Tools. A rule with only Toolset matches every request.
type ToolsetRule struct {
	Principal string            `yaml:"principal"` // the authenticated principal
	Role      string            `yaml:"role"`      // one of its roles (g lines, or the credential's)
	Client    string            `yaml:"client"`    // the clientInfo name the client gave at initialize
	Header    map[string]string `yaml:"header"`    // HTTP request headers and the value each must match
	Toolset   string            `yaml:"toolset"`   // required: a name under toolsets
}

func (l *loader) toolsetFields(x *Toolset) fields {
	return fields{
		"tools":     set(&x.Tools, l.strList),
		"exclude":   set(&x.Exclude, l.strList),
		"discovery": set(&x.Discovery, l.boolean),
	}
}

func (l *loader) toolsetRuleFields(x *ToolsetRule) fields {
	return fields{
		"principal": set(&x.Principal, l.str),
		"role":      set(&x.Role, l.str),
		"client":    set(&x.Client, l.str),
		"header":    func(n ast.Node, p string) { x.Header = l.strMap(n, p, l.checkHeaderName) },
		"toolset":   set(&x.Toolset, l.str),
	}
}

func (l *loader) toolsets(n ast.Node, path string) map[string]*Toolset {
	es := l.entries(n, path, "a mapping of toolset names to {tools, exclude, discovery}")
	out := make(map[string]*Toolset, len(es))
	for _, e := range es {
		t := &Toolset{}
		l.object(e.val, e.path, l.toolsetFields(t))
		out[e.key] = t
	}
	return out
}

func (l *loader) toolsetRules(n ast.Node, path string) []ToolsetRule {
	return objectList(l, n, path, "{principal, role, client, header, toolset}", l.toolsetRuleFields)
}

// checkToolsets checks every toolset's name and patterns, and that every rule names a toolset, uses
// patterns that compile, and can match at all (no rule that matches every request comes before it).
func (l *loader) checkToolsets(c *Config) {
	for _, name := range sortedKeys(c.Toolsets) {
		p := child("toolsets", name)
		if !serverName.MatchString(name) {
			l.reportAt(p, "expected a toolset name of 1 to 64 letters, digits, _ or -, got %q", name)
		}
		t := c.Toolsets[name]
		if len(t.Tools) == 0 && !l.bad[child(p, "tools")] {
			l.reportAt(p, "expected tools: a list of <server>/<tool> patterns such as \"orders/*\"")
		}
		for i, pattern := range t.Tools {
			l.checkToolsetPattern(c, index(child(p, "tools"), i), pattern)
		}
		for i, pattern := range t.Exclude {
			l.checkToolsetPattern(c, index(child(p, "exclude"), i), pattern)
		}
	}
	catchAll := -1
	for i, r := range c.ToolsetRules {
		p := index("toolset_rules", i)
		switch {
		case r.Toolset == "":
			l.reportAt(p, "expected toolset: the name of a toolset under toolsets")
		case c.Toolsets[r.Toolset] == nil:
			l.reportAt(child(p, "toolset"), "names toolset %q, which toolsets does not define (defined: %s)", r.Toolset, strings.Join(sortedKeys(c.Toolsets), ", "))
		}
		l.checkRulePatterns(p, r)
		if catchAll >= 0 {
			l.reportAt(p, "can never match: toolset_rules[%d] before it matches every request", catchAll)
		} else if r.Principal == "" && r.Role == "" && r.Client == "" && len(r.Header) == 0 {
			catchAll = i
		}
	}
}

// checkToolsetPattern checks one toolset pattern: <server>/<tool>, compiling, and naming a configured
// server when its server part has no wildcard (a typo there would silently empty the toolset).
func (l *loader) checkToolsetPattern(c *Config, p, pattern string) {
	server, tool, ok := strings.Cut(pattern, "/")
	switch {
	case !ok || server == "" || tool == "" || strings.Contains(tool, "/"):
		l.reportAt(p, "expected a pattern <server>/<tool> such as \"orders/*\" or \"*/read_*\", got %q", pattern)
	case !validPattern(pattern):
		l.reportAt(p, "expected a pattern as path.Match reads it (*, ?, [a-z]), got %q", pattern)
	case !strings.ContainsAny(server, `*?[\`) && c.Servers[server] == nil:
		l.reportAt(p, "names server %q, which mcpServers does not configure", server)
	}
}

func (l *loader) checkRulePatterns(p string, r ToolsetRule) {
	for key, v := range map[string]string{"principal": r.Principal, "role": r.Role, "client": r.Client} {
		if v != "" && !validPattern(v) {
			l.reportAt(child(p, key), "expected a pattern as path.Match reads it (*, ?, [a-z]), got %q", v)
		}
	}
	for name, v := range r.Header {
		if !validPattern(v) {
			l.reportAt(child(child(p, "header"), name), "expected a pattern as path.Match reads it (*, ?, [a-z]), got %q", v)
		}
	}
}

// validPattern reports whether path.Match accepts the pattern; it checks the syntax of the whole pattern
// whatever the name, so matching it against "" is enough.
func validPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
}
