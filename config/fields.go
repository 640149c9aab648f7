package config

import (
	"github.com/goccy/go-yaml/ast"
)

// The tables below are the schema of toolgate.yaml: one line per allowed key. Unknown-key messages list
// their keys, and a test checks them against the yaml tags in types.go so the two cannot drift apart.

func (l *loader) configFields(c *Config) fields {
	return fields{
		"listen":     func(n ast.Node, p string) { l.object(n, p, l.listenFields(&c.Listen)) },
		"authz":      func(n ast.Node, p string) { l.object(n, p, l.authzFields(&c.Authz)) },
		"auth":       func(n ast.Node, p string) { l.object(n, p, l.authFields(&c.Auth)) },
		"limits":     func(n ast.Node, p string) { l.object(n, p, l.limitsFields(&c.Limits)) },
		"mcpServers": set(&c.Servers, l.servers),
	}
}

func (l *loader) listenFields(x *Listen) fields {
	return fields{
		"http":                set(&x.HTTP, l.str),
		"max_body_bytes":      set(&x.MaxBodyBytes, l.bytes),
		"session_idle_ttl":    set(&x.SessionIdleTTL, l.duration),
		"allowed_origins":     set(&x.AllowedOrigins, l.strList),
		"allow_anonymous":     set(&x.AllowAnonymous, l.boolean),
		"anonymous_principal": set(&x.AnonymousPrincipal, l.str),
	}
}

func (l *loader) authzFields(x *Authz) fields {
	return fields{
		"model":  set(&x.Model, l.str),
		"policy": set(&x.Policy, l.str),
	}
}

func (l *loader) authFields(x *Auth) fields {
	return fields{
		"stdio_principal": set(&x.StdioPrincipal, l.str),
		"api_keys":        set(&x.APIKeys, l.apiKeys),
	}
}

func (l *loader) apiKeyFields(x *APIKey) fields {
	return fields{
		"principal": set(&x.Principal, l.str),
		"sha256":    set(&x.SHA256, l.str),
	}
}

func (l *loader) limitsFields(x *Limits) fields {
	return fields{
		"timeout":          set(&x.Timeout, l.duration),
		"max_result_bytes": set(&x.MaxResultBytes, l.bytes),
		"init_timeout":     set(&x.InitTimeout, l.duration),
	}
}

func (l *loader) serverFields(x *Server) fields {
	return fields{
		"command":          set(&x.Command, l.str),
		"args":             set(&x.Args, l.strList),
		"env":              func(n ast.Node, p string) { x.Env = l.strMap(n, p, l.checkEnvName) },
		"cwd":              set(&x.Cwd, l.str),
		"url":              set(&x.URL, l.str),
		"headers":          func(n ast.Node, p string) { x.Headers = l.strMap(n, p, l.checkHeaderName) },
		"type":             set(&x.Type, l.str),
		"prefix":           set(&x.Prefix, l.prefix),
		"disabled":         set(&x.Disabled, l.boolean),
		"timeout":          set(&x.Timeout, l.duration),
		"max_result_bytes": set(&x.MaxResultBytes, l.bytes),
		"init_timeout":     set(&x.InitTimeout, l.duration),
		"tools":            set(&x.Tools, l.tools),
	}
}

func (l *loader) toolFields(x *Tool) fields {
	return fields{
		"timeout":          set(&x.Timeout, l.duration),
		"max_result_bytes": set(&x.MaxResultBytes, l.bytes),
	}
}

func (l *loader) servers(n ast.Node, path string) map[string]*Server {
	es := l.entries(n, path, "a mapping of server names to servers")
	out := make(map[string]*Server, len(es))
	for _, e := range es {
		s := &Server{Name: e.key}
		l.object(e.val, e.path, l.serverFields(s))
		out[e.key] = s
	}
	return out
}

func (l *loader) tools(n ast.Node, path string) map[string]*Tool {
	es := l.entries(n, path, "a mapping of upstream tool names to overrides")
	out := make(map[string]*Tool, len(es))
	for _, e := range es {
		t := &Tool{}
		l.object(e.val, e.path, l.toolFields(t))
		out[e.key] = t
	}
	return out
}

func (l *loader) apiKeys(n ast.Node, path string) []APIKey {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		l.fail(n, path, "expected a list of {principal, sha256} mappings, got %s", describe(n))
		return nil
	}
	out := make([]APIKey, len(seq.Values))
	for i, item := range seq.Values {
		p := index(path, i)
		l.lines[p] = line(item)
		l.object(item, p, l.apiKeyFields(&out[i]))
	}
	return out
}

// prefix keeps nil for "not written" so that ToolPrefix can tell the default from an explicit "".
func (l *loader) prefix(n ast.Node, path string) *string {
	s := l.str(n, path)
	if l.bad[path] {
		return nil
	}
	return &s
}
