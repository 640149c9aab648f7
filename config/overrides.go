package config

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/toolgate/toolgate/toolschema"
)

// ToolOverride is the operator's reshaping of one upstream tool, under mcpServers.<server>.tools.<tool>.override
// (docs/configuration.md, "Tool overrides"). What clients see changes; what the upstream gets is its own
// tool name and arguments its own schema accepts. Whether the hidden and narrowed parameters exist, and
// whether the fixed values fit them, can only be checked against the upstream's schema: the catalog does
// that when the server lists its tools (package upstreams/overrides), and quarantines a tool whose
// override does not fit it.
type ToolOverride struct {
	// Name is the client-facing name, verbatim (the server's prefix is not added); "" keeps
	// <prefix><tool>. Policy, pins, rate limits and metrics keep naming the tool <server>/<tool>.
	Name              string  `yaml:"name"`
	Title             *string `yaml:"title"`              // replaces the tool's title
	Description       *string `yaml:"description"`        // replaces the upstream's description
	DescriptionAppend string  `yaml:"description_append"` // added after the upstream's description
	// Annotations replace the upstream's hints one by one; a hint not written keeps the upstream's.
	Annotations *OverrideAnnotations `yaml:"annotations"`
	// Hide maps parameters to the JSON value the gateway always sends: clients never see them, and a
	// call that sets one is refused.
	Hide map[string]json.RawMessage `yaml:"hide"`
	// Narrow maps parameters to a JSON Schema fragment the argument must also satisfy, e.g. {enum: [a, b]}.
	Narrow map[string]json.RawMessage `yaml:"narrow"`
}

// OverrideAnnotations are the MCP tool annotations an override may set, under their MCP names.
type OverrideAnnotations struct {
	ReadOnlyHint    *bool `yaml:"readOnlyHint"`
	DestructiveHint *bool `yaml:"destructiveHint"`
	IdempotentHint  *bool `yaml:"idempotentHint"`
	OpenWorldHint   *bool `yaml:"openWorldHint"`
}

func (l *loader) toolOverrideFields(x *ToolOverride) fields {
	return fields{
		"name":               set(&x.Name, l.str),
		"title":              set(&x.Title, l.optStr),
		"description":        set(&x.Description, l.optStr),
		"description_append": set(&x.DescriptionAppend, l.str),
		"annotations": func(n ast.Node, p string) {
			x.Annotations = &OverrideAnnotations{}
			l.object(n, p, l.overrideAnnotationsFields(x.Annotations))
		},
		"hide":   func(n ast.Node, p string) { x.Hide = l.jsonMap(n, p, false) },
		"narrow": func(n ast.Node, p string) { x.Narrow = l.jsonMap(n, p, true) },
	}
}

func (l *loader) overrideAnnotationsFields(x *OverrideAnnotations) fields {
	return fields{
		"readOnlyHint":    set(&x.ReadOnlyHint, l.optBool),
		"destructiveHint": set(&x.DestructiveHint, l.optBool),
		"idempotentHint":  set(&x.IdempotentHint, l.optBool),
		"openWorldHint":   set(&x.OpenWorldHint, l.optBool),
	}
}

func (l *loader) toolOverride(n ast.Node, path string) *ToolOverride {
	o := &ToolOverride{}
	l.object(n, path, l.toolOverrideFields(o))
	return o
}

// optStr keeps nil for "not written", so that an explicit "" (no description at all) differs from it.
func (l *loader) optStr(n ast.Node, path string) *string {
	s := l.str(n, path)
	if l.bad[path] {
		return nil
	}
	return &s
}

// jsonMap decodes a mapping of parameter names to JSON values; schemas says each value is a JSON Schema
// fragment (a mapping).
func (l *loader) jsonMap(n ast.Node, path string, schemas bool) map[string]json.RawMessage {
	want := "a mapping of parameter names to fixed values"
	if schemas {
		want = "a mapping of parameter names to JSON Schema fragments such as {enum: [a, b]}"
	}
	es := l.entries(n, path, want)
	out := make(map[string]json.RawMessage, len(es))
	for _, e := range es {
		v := l.resolve(e.val, e.path)
		if schemas {
			if _, isMap := v.(*ast.MappingNode); !isMap {
				l.fail(v, e.path, "expected a JSON Schema fragment (a mapping such as {enum: [a, b]}), got %s", describe(v))
				continue
			}
		}
		if raw, ok := l.jsonValue(v, e.path); ok {
			out[e.key] = raw
		}
	}
	return out
}

// jsonValue turns a YAML value into JSON, keeping the digits of numbers as written. Strings expand
// ${VAR} like every other string of the file.
func (l *loader) jsonValue(n ast.Node, path string) (json.RawMessage, bool) {
	n = l.resolve(n, path)
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return json.RawMessage("null"), true
	case *ast.BoolNode:
		return json.RawMessage(strconv.FormatBool(v.Value)), true
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return json.RawMessage(strconv.FormatInt(i, 10)), true
		case uint64:
			return json.RawMessage(strconv.FormatUint(i, 10)), true
		}
	case *ast.FloatNode:
		if !math.IsInf(v.Value, 0) && !math.IsNaN(v.Value) {
			return json.RawMessage(strconv.FormatFloat(v.Value, 'g', -1, 64)), true
		}
	case *ast.StringNode, *ast.LiteralNode:
		if isHugeInt(n) {
			return json.RawMessage(n.(*ast.StringNode).Value), true
		}
		s := l.str(n, path)
		if l.bad[path] {
			return nil, false
		}
		b, _ := json.Marshal(s)
		return b, true
	case *ast.SequenceNode:
		var b strings.Builder
		b.WriteByte('[')
		for i, item := range v.Values {
			p := index(path, i)
			l.lines[p] = line(item)
			raw, ok := l.jsonValue(item, p)
			if !ok {
				return nil, false
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(raw)
		}
		b.WriteByte(']')
		return json.RawMessage(b.String()), true
	case *ast.MappingNode:
		var b strings.Builder
		b.WriteByte('{')
		for i, e := range l.entries(v, path, "a mapping") {
			raw, ok := l.jsonValue(e.val, e.path)
			if !ok {
				return nil, false
			}
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(e.key)
			b.Write(k)
			b.WriteByte(':')
			b.Write(raw)
		}
		b.WriteByte('}')
		return json.RawMessage(b.String()), true
	}
	l.fail(n, path, "expected a JSON value (null, a boolean, a number, a string, a list or a mapping), got %s", describe(n))
	return nil, false
}

// checkOverride checks one tool override: what can be checked without the upstream's schema. names maps each client-facing name an override gives to where it was given, across servers.
func (l *loader) checkOverride(path string, o *ToolOverride, names map[string]string) {
	if o == nil {
		return
	}
	if o.Name != "" {
		np := path + ".name"
		switch {
		case !serverName.MatchString(o.Name):
			l.reportAt(np, "expected a tool name of 1 to 64 of A-Z a-z 0-9 _ -, got %q", o.Name)
		case strings.HasPrefix(o.Name, reservedToolPrefix):
			l.reportAt(np, "expected a name that does not start with %s: that prefix is the gateway's own tools' (toolgate__search_tools, toolgate__call_tool), got %q", reservedToolPrefix, o.Name)
		case names[o.Name] != "":
			l.reportAt(np, "expected a client-facing name no other tool has; %q is also given at %s", o.Name, names[o.Name])
		default:
			names[o.Name] = np
		}
	}
	if o.Description != nil && o.DescriptionAppend != "" {
		l.reportAt(path+".description_append", "set either description (replaces the upstream's) or description_append (adds to it), not both")
	}
	for _, p := range sortedKeys(o.Hide) {
		l.checkParameterPath(child(path+".hide", p), p)
		if _, both := o.Narrow[p]; both {
			l.reportAt(child(path+".narrow", p), "parameter %q is hidden (hide fixes its value); it cannot be narrowed too", p)
		}
		for _, q := range sortedKeys(o.Hide) {
			if strings.HasPrefix(q, p+".") {
				l.reportAt(child(path+".hide", q), "parameter %q is inside %q, which is hidden already (its fixed value holds the whole object)", q, p)
			}
		}
		for _, q := range sortedKeys(o.Narrow) {
			if strings.HasPrefix(q, p+".") {
				l.reportAt(child(path+".narrow", q), "parameter %q is inside %q, which is hidden (its fixed value holds the whole object); clients cannot send it", q, p)
			}
		}
	}
	for _, p := range sortedKeys(o.Narrow) {
		pp := child(path+".narrow", p)
		l.checkParameterPath(pp, p)
		if _, err := toolschema.Compile(o.Narrow[p], toolschema.Limits{}); err != nil {
			l.reportAt(pp, "expected a JSON Schema fragment: %v", err)
		}
	}
}

// checkParameterPath checks the form of a hidden or narrowed parameter's
// key: a property name, or property names joined with dots for a parameter
// nested in objects (options.dry_run). Whether the path exists can only be
// checked against the upstream's schema, when the server lists its tools.
func (l *loader) checkParameterPath(at, p string) {
	switch {
	case p == "":
		l.reportAt(at, "expected a parameter name, got an empty key")
	case strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, ".."):
		l.reportAt(at, "expected a parameter name, or names joined with dots for a nested one (options.dry_run), got %q", p)
	}
}

// reservedToolPrefix starts the names of the gateway's own tools, the discovery meta-tools
// toolgate__search_tools and toolgate__call_tool (package discovery).
const reservedToolPrefix = "toolgate__"

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkOverrides checks the tool overrides of every server, in a stable order, so that a client-facing
// name given twice is reported at its second place.
func (l *loader) checkOverrides(c *Config) {
	names := map[string]string{}
	for _, server := range c.ServerNames() {
		s := c.Servers[server]
		for _, tool := range sortedKeys(s.Tools) {
			if t := s.Tools[tool]; t != nil {
				l.checkOverride(child(child("mcpServers", server)+".tools", tool)+".override", t.Override, names)
			}
		}
	}
}
