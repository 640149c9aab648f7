package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads, expands, decodes and validates the config file at path, taking ${VAR} values from the
// process environment. On any problem it returns a *Problems holding every problem found.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Problems{List: []Problem{{File: path, Msg: readError(err)}}}
	}
	return Parse(path, data, os.LookupEnv)
}

// readError leaves out the path that *fs.PathError repeats, since Problem.File already names it.
func readError(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "cannot read the config file: it does not exist"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return "cannot read the config file: " + err.Error()
}

// Parse is Load on bytes. path names the file in messages, and its directory is the base for relative
// paths in the config. env looks up ${VAR} values; nil means os.LookupEnv.
func Parse(path string, data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	c := &Config{}
	dir, err := c.setFile(path)
	if err != nil {
		return nil, &Problems{List: []Problem{{File: path, Msg: err.Error()}}}
	}
	l := &loader{file: path, env: env, lines: map[string]int{}, bad: map[string]bool{}}
	l.load(c, data)
	if len(l.probs) > 0 {
		if kind := clientFileKind(data); kind != "" {
			// Its problems as a toolgate config (preferences: unknown key, ...) would only say how far
			// the two formats are apart; what helps is the command that converts it.
			return nil, &Problems{List: []Problem{{File: path, Msg: fmt.Sprintf(
				"this looks like a %s MCP config, not a toolgate config; run `toolgate import %s` to write a toolgate config and a starter policy from it",
				kind, path)}}}
		}
		sortProblems(l.probs)
		return nil, &Problems{List: l.probs}
	}
	resolvePaths(c, dir)
	if p, ok := checkShadowPolicy(c, path, l.lines["authz.shadow_policy"]); !ok {
		return nil, &Problems{List: []Problem{p}}
	}
	return c, nil
}

// setFile records the absolute path of the file and returns the directory relative paths start from; a
// config without a file name resolves against the working directory.
func (c *Config) setFile(path string) (dir string, err error) {
	if path == "" {
		return filepath.Abs(".")
	}
	if c.File, err = filepath.Abs(path); err != nil {
		return "", err
	}
	return filepath.Dir(c.File), nil
}

// load decodes then validates: the checks need the whole config (defaults, sibling keys) in typed form.
func (l *loader) load(c *Config, data []byte) {
	root, ok := l.parse(data)
	if !ok {
		return
	}
	l.collectAnchors(root)
	l.object(root, "", l.configFields(c))
	if l.tooManyAliases > 0 {
		l.probs = l.probs[:l.tooManyAliases]
		return
	}
	l.checkListen(&c.Listen)
	l.checkAuth(c)
	l.checkLimits("limits", c.Limits, Limits{})
	l.checkBudget("limits.retry_budget", c.Limits.RetryBudget)
	l.checkDedup("limits.dedup", c.Limits.Dedup)
	l.checkPinning(&c.Pinning)
	l.checkDescriptionScan("description_scan", c.DescriptionScan)
	l.checkAdmin(c)
	l.checkApprovals(&c.Approvals)
	l.checkAudit(&c.Audit)
	l.checkRateLimits(c)
	l.checkState(&c.State)
	l.checkConsole(c)
	l.checkApprovalRules(c)
	l.checkConnect(c)
	l.checkRedaction(&c.Redaction)
	for _, name := range c.ServerNames() {
		l.checkServer(child("mcpServers", name), c.Servers[name], c.Limits)
		l.checkUpstreamAuth(c, child("mcpServers", name), c.Servers[name])
		l.checkEgress(child("mcpServers", name), c.Servers[name])
	}
	l.checkOverrides(c)
	l.checkCredentials(c)
	l.checkToolsets(c)
}

// parse returns the body of the one document in the file; nil for an empty file, which is valid.
func (l *loader) parse(data []byte) (ast.Node, bool) {
	// Duplicate keys are allowed here so that entries can report each of them with both lines instead of
	// the parser stopping at the first.
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		l.syntaxError(err)
		return nil, false
	}
	if len(f.Docs) == 0 {
		return nil, true
	}
	if len(f.Docs) > 1 {
		l.report(docLine(f.Docs[1]), "", "expected one YAML document, found %d (remove the extra ---)", len(f.Docs))
	}
	return f.Docs[0].Body, true
}

// docLine points at the "---" that starts a document, when there is one.
func docLine(d *ast.DocumentNode) int {
	if d.Start != nil {
		return d.Start.Position.Line
	}
	return line(d.Body)
}

func (l *loader) syntaxError(err error) {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		l.report(ye.GetToken().Position.Line, "", "invalid YAML: %s", ye.GetMessage())
		return
	}
	l.report(0, "", "invalid YAML: %v", err)
}

// clientFileKind says which client's MCP config data looks like ("" for none), for a JSON file that
// failed to load: a client's file is JSON that toolgate's YAML parser reads, so without this its problems read as
// typos ("preferences: unknown key") rather than as the wrong kind of file. It looks for what only a
// client writes: VS Code's servers, inputs or mcp (settings.json) at the top; mcpServers beside keys
// toolgate does not have and that are not misspellings of its keys (Claude Desktop's preferences), and
// none of toolgate's own; a server field only clients have (envFile,
// autoApprove); a client's own variables (${env:NAME}, ${input:id}, ${userHome}, ${workspaceFolder}); and,
// when the YAML parser gave up or glued a comment to a key, JSON with // or /* comments around a server
// list.
func clientFileKind(data []byte) string {
	const vscode, desktop = "VS Code", "Claude Desktop or Cursor"
	if !looksJSON(data) {
		return "" // clients write JSON; a YAML file is toolgate's own, whose problems say what to fix
	}
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	var top *ast.MappingNode
	if err == nil && len(f.Docs) == 1 {
		top, _ = f.Docs[0].Body.(*ast.MappingNode)
	}
	if top == nil {
		return jsoncClientKind(data)
	}
	own := (&loader{}).configFields(&Config{})
	var servers ast.Node
	otherKeys, ownKeys := false, false
	for _, kv := range top.Values {
		key := kv.Key.GetToken().Value
		switch {
		case key == "servers" || key == "inputs" || key == "mcp":
			return vscode
		case strings.HasPrefix(key, "//") || strings.HasPrefix(key, "/*"):
			return jsoncClientKind(data)
		case key == "mcpServers":
			servers = kv.Value
		case own[key] != nil:
			ownKeys = true
		case suggest(key, own) == "": // not a misspelt toolgate key
			otherKeys = true
		}
	}
	if servers == nil || ownKeys { // a client's file has none of listen, authz, auth, limits...
		return ""
	}
	if otherKeys {
		return desktop
	}
	kind := ""
	ast.Walk(visitor(func(n ast.Node) {
		switch v := n.(type) {
		case *ast.MappingValueNode:
			if k := v.Key.GetToken().Value; clientOnlyServerKeys[k] {
				kind = desktop
			}
		case *ast.StringNode:
			if clientVariable.MatchString(v.Value) {
				kind = desktop
			}
		}
	}), servers)
	return kind
}

var (
	// clientOnlyServerKeys are server settings of clients (VS Code, Cursor, Cline) that toolgate does not have.
	clientOnlyServerKeys = map[string]bool{"envFile": true, "autoApprove": true, "alwaysAllow": true, "disabledTools": true, "transportType": true}
	// clientVariable is a variable of the clients' own, which toolgate's ${NAME} does not read.
	clientVariable = regexp.MustCompile(`\$\{(env:|input:|userHome\}|workspaceFolder)`)
	jsonServerList = regexp.MustCompile(`"(mcpServers|servers)"\s*:`)
	jsonComment    = regexp.MustCompile(`(?m)^\s*(//|/\*)`)
)

// looksJSON: the file starts with {, or with a comment as JSONC may.
func looksJSON(data []byte) bool {
	trimmed := strings.TrimSpace(strings.TrimPrefix(string(data), "\ufeff"))
	return strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "//") || strings.HasPrefix(trimmed, "/*")
}

// jsoncClientKind recognises a client file by its text, for JSON with comments that YAML cannot read.
func jsoncClientKind(data []byte) string {
	trimmed := strings.TrimSpace(string(data))
	m := jsonServerList.FindStringSubmatch(trimmed)
	switch {
	case m == nil || !jsonComment.MatchString(trimmed) && m[1] == "mcpServers":
		return ""
	case m[1] == "servers":
		return "VS Code"
	}
	return "Claude Desktop, Cursor or VS Code"
}
