package clientfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Client is the kind of file read; it decides the shape of the snippet printed back.
type Client string

// The clients whose files Parse reads.
const (
	ClaudeDesktop  Client = "Claude Desktop"           // claude_desktop_config.json: mcpServers
	Cursor         Client = "Cursor"                   // .cursor/mcp.json: mcpServers
	MCPServers     Client = "Claude Desktop or Cursor" // another file with top-level mcpServers
	VSCode         Client = "VS Code"                  // .vscode/mcp.json or the user mcp.json: servers, inputs
	VSCodeSettings Client = "VS Code settings"         // settings.json: mcp.servers, mcp.inputs
)

// Import is what Parse read from one client file, in toolgate's terms.
type Import struct {
	File     string    // the client file, absolute
	Client   Client    // which client's format it is
	Servers  []*Server // sorted by toolgate name
	Vars     []*Var    // the environment variables the written config reads, sorted by name
	Warnings []Warning // what could not be carried over or was changed, by server (in name order)
	// Inputs are VS Code's input definitions, as written, for the snippet (which keeps the ones it uses).
	Inputs []json.RawMessage
}

// Server is one upstream, ready for toolgate.yaml: every string is in toolgate's syntax (a literal ${
// written as $${, variables as ${NAME}).
type Server struct {
	Name      string // the toolgate server name
	Source    string // the name in the client file
	Transport string // stdio, http or sse
	Command   string
	Args      []string
	Env       map[string]string
	Cwd       string
	URL       string
	Headers   map[string]string
	Disabled  bool
}

// Var is an environment variable the written config reads with ${Name}.
type Var struct {
	Name   string
	Secret bool     // it stands for a credential that was a literal or a VS Code input
	Input  string   // the VS Code input id it replaces, if any
	From   string   // where its value is to be found, for the operator
	Uses   []string // key paths in toolgate.yaml, e.g. mcpServers.github.env.GITHUB_TOKEN
	key    string   // what it stands for (a literal's value, input:id, env:NAME): same key, same variable
}

// Warning is one thing of the client file that toolgate.yaml does not carry; Server is "" for the file.
type Warning struct {
	Server string // toolgate server name
	Msg    string
}

func (w Warning) String() string {
	if w.Server == "" {
		return w.Msg
	}
	return "mcpServers." + w.Server + ": " + w.Msg
}

var (
	serverNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	nameBadChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	underscores  = regexp.MustCompile(`__+`)
)

// Parse reads a client file. path names it in messages and decides the client (by file name) and the
// workspace folder of ${workspaceFolder} (the parent of .vscode or .cursor).
func Parse(path string, data []byte) (*Import, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	im := &Import{File: abs}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a BOM, which Windows editors write
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the file is empty", path)
	}
	var top map[string]json.RawMessage
	if err := decode(stripJSONC(data), &top); err != nil {
		if errors.As(err, new(*json.UnmarshalTypeError)) {
			top = nil // valid JSON, but not an object: locate says so
		} else {
			return nil, fmt.Errorf("%s: not valid JSON%s", path, jsonWhere(data, err))
		}
	}
	servers, err := im.locate(path, top)
	if err != nil {
		return nil, err
	}
	var entries map[string]json.RawMessage
	if err := decode(servers, &entries); err != nil || entries == nil {
		return nil, fmt.Errorf("%s: %s: expected an object of server names to servers, got %s", path, im.listKey(), describe(servers))
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: %s is empty: there are no servers to import", path, im.listKey())
	}
	names := map[string]string{} // toolgate name -> source name
	r := &reader{im: im, path: path, workspace: workspaceOf(abs), sources: names}
	sources := slices.Sorted(maps.Keys(entries))
	for _, src := range sources {
		name, err := normalizeName(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %s[%q]: %v", path, im.listKey(), src, err)
		}
		if other, dup := names[name]; dup {
			return nil, fmt.Errorf("%s: servers %q and %q would both be named %q in toolgate (server names are 1 to 64 of A-Z a-z 0-9 _ - without \"__\"); rename one of them in the client file first", path, other, src, name)
		}
		names[name] = src
	}
	r.reserveEnvRefs(stripJSONC(data))
	for _, src := range sources {
		name, _ := normalizeName(src)
		s, err := r.server(name, src, entries[src])
		if err != nil {
			return nil, fmt.Errorf("%s: %s[%q]: %v", path, im.listKey(), src, err)
		}
		im.Servers = append(im.Servers, s)
	}
	r.dropUnusedVars()
	slices.SortFunc(im.Servers, func(a, b *Server) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(im.Vars, func(a, b *Var) int { return strings.Compare(a.Name, b.Name) })
	return im, nil
}

// locate finds the server list and decides the client.
func (im *Import) locate(path string, top map[string]json.RawMessage) (json.RawMessage, error) {
	if top == nil {
		return nil, fmt.Errorf("%s: not a JSON object: a client config is JSON with mcpServers (Claude Desktop, Cursor) or servers (VS Code) at the top", path)
	}
	mcpServers, hasMCP := top["mcpServers"]
	servers, hasServers := top["servers"]
	mcpSection, hasSection := top["mcp"]
	switch {
	case hasMCP && hasServers:
		return nil, fmt.Errorf("%s: has both mcpServers (Claude Desktop, Cursor) and servers (VS Code); import one list at a time", path)
	case hasMCP:
		im.Client = MCPServers
		switch base := filepath.Base(im.File); {
		case base == "claude_desktop_config.json":
			im.Client = ClaudeDesktop
		case filepath.Base(filepath.Dir(im.File)) == ".cursor":
			im.Client = Cursor
		}
		return mcpServers, nil
	case hasServers:
		im.Client = VSCode
		return servers, im.inputs(path, top["inputs"])
	case hasSection:
		var section map[string]json.RawMessage
		if err := decode(mcpSection, &section); err != nil || section["servers"] == nil {
			return nil, fmt.Errorf("%s: mcp: expected an object with servers (VS Code settings.json)", path)
		}
		im.Client = VSCodeSettings
		return section["servers"], im.inputs(path, section["inputs"])
	}
	keys := slices.Sorted(maps.Keys(top))
	return nil, fmt.Errorf("%s: no servers to import: expected mcpServers (Claude Desktop, Cursor), servers (VS Code mcp.json) or mcp.servers (VS Code settings.json) at the top, found %s",
		path, quoteList(keys))
}

func (im *Import) inputs(path string, raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	if err := decode(raw, &im.Inputs); err != nil {
		return fmt.Errorf("%s: inputs: expected a list of input definitions", path)
	}
	return nil
}

// listKey is the key path of the server list, for messages.
func (im *Import) listKey() string {
	switch im.Client {
	case VSCode:
		return "servers"
	case VSCodeSettings:
		return "mcp.servers"
	}
	return "mcpServers"
}

// inputDescription is the description of a VS Code input, for telling the operator what to set.
func (im *Import) inputDescription(id string) string {
	for _, raw := range im.Inputs {
		var in struct{ ID, Description string }
		if json.Unmarshal(raw, &in) == nil && in.ID == id {
			return in.Description
		}
	}
	return ""
}

// normalizeName makes a client's server name a valid toolgate server name.
func normalizeName(src string) (string, error) {
	name := nameBadChars.ReplaceAllString(src, "-")
	name = underscores.ReplaceAllString(name, "_")
	name = strings.Trim(name, "-")
	if len(name) > 64 {
		name = strings.TrimRight(name[:64], "-")
	}
	if name == "" || !serverNameRe.MatchString(name) {
		return "", fmt.Errorf("no usable toolgate server name in %q (server names are 1 to 64 of A-Z a-z 0-9 _ -); rename it in the client file", src)
	}
	return name, nil
}

// workspaceOf is the workspace folder of a file kept in <workspace>/.vscode or <workspace>/.cursor; "".
func workspaceOf(abs string) string {
	dir := filepath.Dir(abs)
	if b := filepath.Base(dir); b == ".vscode" || b == ".cursor" {
		return filepath.Dir(dir)
	}
	return ""
}

func decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// jsonWhere describes a decoding error with the line and column it happened at, when it has an offset.
func jsonWhere(data []byte, err error) string {
	if err == nil {
		return ""
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		return fmt.Sprintf(": expected %s, got a JSON %s", te.Type, te.Value)
	}
	if off < 0 || data == nil {
		return ": " + err.Error()
	}
	line, col := 1, 1
	// The offset counts the bytes read, the offending one included.
	for _, c := range data[:max(0, min(int(off)-1, len(data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf(" (line %d, column %d): %v", line, col, err)
}

func quoteList(keys []string) string {
	if len(keys) == 0 {
		return "an empty object"
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
