package clientfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/upstreams/egress"
)

// Role is the policy role the starter policy gives every imported tool, and StdioPrincipal the
// principal that holds it: the client on stdio.
const (
	Role           = "imported"
	StdioPrincipal = "local"
)

// ConfigYAML is toolgate.yaml for the imported servers; configPath is where it will be written, for the
// check command its header shows.
func (im *Import) ConfigYAML(configPath string) []byte {
	var b bytes.Buffer
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line("# toolgate configuration, written by `toolgate import` from")
	line("#   %s (%s)", comment(im.File), im.Client)
	line("# Its servers run behind toolgate now. policy.csv, beside this file, lets the client on stdio")
	line("# (auth.stdio_principal: %s) list and call every tool of every server: narrow it there.", StdioPrincipal)
	if len(im.Vars) > 0 {
		line("#")
		line("# No secret is written here: each ${NAME} below is read from the environment toolgate starts in.")
		line("# Set these first:")
		for _, v := range im.Vars {
			kind := "from"
			if v.Secret {
				kind = "secret, from"
			}
			line("#   %s (%s %s)", v.Name, kind, comment(v.From))
		}
	}
	line("#")
	line("# Check it:  toolgate check --config %s", comment(configPath))
	line("")
	line("authz:")
	line("  model: model.conf               # relative to this file")
	line("  policy: policy.csv")
	line("")
	line("auth:")
	line("  stdio_principal: %s            # who the client that starts toolgate over stdio is", StdioPrincipal)
	line("")
	line("mcpServers:")
	for _, s := range im.Servers {
		for _, w := range im.Warnings {
			if w.Server == s.Name {
				line("  # %s", comment(w.Msg))
			}
		}
		line("  %s:", s.Name)
		if s.Disabled {
			line("    disabled: true")
		}
		switch s.Transport {
		case "stdio":
			line("    command: %s", quote(s.Command))
			if len(s.Args) > 0 {
				q := make([]string, len(s.Args))
				for i, a := range s.Args {
					q[i] = quote(a)
				}
				line("    args: [%s]", strings.Join(q, ", "))
			}
			if s.Cwd != "" {
				line("    cwd: %s", quote(s.Cwd))
			}
			writeMap(line, "env", s.Env)
		default:
			if s.Transport == "sse" {
				line("    type: sse")
			}
			line("    url: %s", quote(s.URL))
			if host, class := internalHost(s.URL); class != "" {
				line("    egress: {allow: [%s]}   # %s is a %s address, which toolgate refuses unless allowed", class, comment(host), class)
			}
			writeMap(line, "headers", s.Headers)
		}
	}
	return b.Bytes()
}

func writeMap(line func(string, ...any), key string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	line("    %s:", key)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		line("      %s: %s", quote(k), quote(m[k]))
	}
}

// internalHost is the URL's host and its egress class when the host is a loopback, private or
// link-local address (or localhost), which the client reached and toolgate's egress guard refuses
// unless the server's egress.allow says so; class is "" otherwise (a host name is judged at dial time).
func internalHost(raw string) (host string, class egress.Class) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	host = u.Hostname()
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return host, egress.Loopback
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", ""
	}
	if c := egress.Classify(a); slices.Contains(egress.AllowableClasses, c) {
		return host, c
	}
	return "", ""
}

// quote writes a string as a YAML double-quoted scalar; JSON's escapes are all valid there.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// comment keeps text on one comment line.
func comment(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// Policy is the starter policy.csv: the role Role may list and call every tool of every imported
// server, read their resources and get their prompts (what the client could do before), and the stdio
// principal has it. Nothing else is allowed.
func (im *Import) Policy() []byte {
	var b bytes.Buffer
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line("# toolgate access policy, a starter written by `toolgate import` from")
	line("#   %s", comment(im.File))
	line("#")
	line("# Anything not allowed here is denied, so a server added to toolgate.yaml later has no tools for")
	line("# anyone until a line here allows them. A \"deny\" line beats every \"allow\" line.")
	line("#")
	line("# The role %q may list and call every tool of every imported server, read their resources and", Role)
	line("# get their prompts: what the client could do before toolgate stood in between. The client on")
	line("# stdio (auth.stdio_principal: %s in toolgate.yaml) has that role.", StdioPrincipal)
	line("#")
	line("# To narrow it (see docs/policy.md in the toolgate repository):")
	line("#   - list the tools: toolgate tools --config toolgate.yaml --as %s", StdioPrincipal)
	line("#   - replace a \"<server>/*\" line with one line per tool you want, e.g.")
	line("#       p, %s, <server>/<tool>, call, allow", Role)
	line("#   - or keep it and deny single tools, e.g.")
	line("#       p, %s, <server>/<tool>, call, deny", Role)
	line("#   - or allow a tool only for some arguments, e.g.")
	line("#       p, %s, <server>/write_file, call, allow, \"path startsWith '/Users/you/scratch/'\"", Role)
	line("#   - or make a tool wait for a human approval:")
	line("#       a, %s, <server>/<tool>, call", Role)
	line("#   - check a decision: toolgate explain %s <server>__<tool>", StdioPrincipal)
	line("#")
	line("# Comments start with \"#\" on their own line. The file must end with a newline.")
	for _, s := range im.Servers {
		line("")
		line("# %s (%q in the client file)", s.Name, s.Source)
		line("p, %s, %s/*, call, allow", Role, s.Name)
		line("p, %s, %s/*, read, allow", Role, s.Name)
		line("p, %s, %s/*, get, allow", Role, s.Name)
	}
	line("")
	line("# --- Who has which role ---")
	line("g, %s, %s", StdioPrincipal, Role)
	return b.Bytes()
}

// snippetEntry is the toolgate entry of a client's server list.
type snippetEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// Snippet is the part of the client's file that starts toolgate in place of the imported servers:
// command is the toolgate binary, configPath the written toolgate.yaml (both absolute). The variables
// the config reads are passed in env, the way the client can: VS Code from its inputs (a literal secret
// gets a password input), Cursor from its environment, Claude Desktop as placeholders to fill in.
func (im *Import) Snippet(command, configPath string) string {
	e := snippetEntry{Command: command, Args: []string{"serve", "--stdio", "--config", configPath}}
	var inputs []any
	vscode := im.Client == VSCode || im.Client == VSCodeSettings
	if vscode {
		e.Type = "stdio"
	}
	used := map[string]bool{}
	for _, v := range im.Vars {
		if e.Env == nil {
			e.Env = map[string]string{}
		}
		switch {
		case vscode && v.Input != "":
			e.Env[v.Name] = "${input:" + v.Input + "}"
			if !used[v.Input] {
				used[v.Input] = true
				for _, raw := range im.Inputs {
					var in struct{ ID string }
					if json.Unmarshal(raw, &in) == nil && in.ID == v.Input {
						inputs = append(inputs, raw)
					}
				}
			}
		case vscode && v.Secret:
			id := strings.ToLower(strings.ReplaceAll(v.Name, "_", "-"))
			e.Env[v.Name] = "${input:" + id + "}"
			inputs = append(inputs, map[string]any{"type": "promptString", "id": id, "description": v.Name + " for toolgate", "password": true})
		case vscode || im.Client == Cursor:
			e.Env[v.Name] = "${env:" + v.Name + "}"
		default:
			e.Env[v.Name] = "<" + v.Name + ">"
		}
	}
	servers := map[string]any{"toolgate": e}
	var doc any
	switch im.Client {
	case VSCode:
		doc = struct {
			Servers map[string]any `json:"servers"`
			Inputs  []any          `json:"inputs,omitempty"`
		}{servers, inputs}
	case VSCodeSettings:
		doc = map[string]any{"mcp": struct {
			Servers map[string]any `json:"servers"`
			Inputs  []any          `json:"inputs,omitempty"`
		}{servers, inputs}}
	default:
		doc = map[string]any{"mcpServers": servers}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(doc)
	return b.String()
}
