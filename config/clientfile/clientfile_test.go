package clientfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
)

// parseFixture parses a file of testdata.
func parseFixture(t *testing.T, name string) *Import {
	t.Helper()
	path := filepath.Join("testdata", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	im, err := Parse(path, data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return im
}

// loadConfig checks that the generated toolgate.yaml loads, with the import's variables set to
// placeholders, and returns it.
func loadConfig(t *testing.T, im *Import) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	env := func(name string) (string, bool) {
		for _, v := range im.Vars {
			if v.Name == name {
				return "value-of-" + name, true
			}
		}
		if name == "HOME" {
			return "/home/you", true
		}
		t.Errorf("the generated config reads $%s, which Import.Vars does not list", name)
		return "", false
	}
	text := im.ConfigYAML(path)
	cfg, err := config.Parse(path, text, env)
	if err != nil {
		t.Fatalf("generated toolgate.yaml does not load: %v\n%s", err, text)
	}
	return cfg
}

// noSecrets fails when any output holds one of the secret literals.
func noSecrets(t *testing.T, im *Import, secrets ...string) {
	t.Helper()
	outputs := map[string]string{
		"toolgate.yaml": string(im.ConfigYAML("/out/toolgate.yaml")),
		"policy.csv":    string(im.Policy()),
		"snippet":       im.Snippet("/bin/toolgate", "/out/toolgate.yaml"),
	}
	for _, w := range im.Warnings {
		outputs["warnings"] += w.String() + "\n"
	}
	for _, v := range im.Vars {
		outputs["vars"] += v.Name + " " + v.From + "\n"
	}
	for name, text := range outputs {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret %q:\n%s", name, s, text)
			}
		}
	}
}

func findVar(im *Import, name string) *Var {
	for _, v := range im.Vars {
		if v.Name == name {
			return v
		}
	}
	return nil
}

func varNames(im *Import) []string {
	var names []string
	for _, v := range im.Vars {
		names = append(names, v.Name)
	}
	return names
}

func warningsText(im *Import) string {
	var b strings.Builder
	for _, w := range im.Warnings {
		b.WriteString(w.String() + "\n")
	}
	return b.String()
}

func TestClaudeDesktopConfig(t *testing.T) {
	im := parseFixture(t, "claude_desktop_config.json")
	if im.Client != ClaudeDesktop {
		t.Errorf("client = %q, want %q", im.Client, ClaudeDesktop)
	}
	if len(im.Warnings) != 0 {
		t.Errorf("preferences and globalShortcut are the app's settings, ignored without a warning; got:\n%s", warningsText(im))
	}
	cfg := loadConfig(t, im)
	if got := cfg.ServerNames(); strings.Join(got, ",") != "filesystem,github" {
		t.Fatalf("servers = %v, want filesystem, github", got)
	}
	fs := cfg.Servers["filesystem"]
	if fs.Command != "npx" || strings.Join(fs.Args, " ") != "-y @modelcontextprotocol/server-filesystem /Users/you/Desktop /Users/you/Downloads" {
		t.Errorf("filesystem = %q %q", fs.Command, fs.Args)
	}
	gh := cfg.Servers["github"]
	if gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "value-of-GITHUB_PERSONAL_ACCESS_TOKEN" {
		t.Errorf("the token is not read from the environment: %q", gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"])
	}
	if gh.Env["GITHUB_TOOLSETS"] != "repos,issues" {
		t.Errorf("a plain setting is copied as it is, got %q", gh.Env["GITHUB_TOOLSETS"])
	}
	v := findVar(im, "GITHUB_PERSONAL_ACCESS_TOKEN")
	if len(im.Vars) != 1 || v == nil || !v.Secret || !strings.Contains(v.From, `env GITHUB_PERSONAL_ACCESS_TOKEN of server "github"`) {
		t.Errorf("vars = %+v", im.Vars)
	}
	noSecrets(t, im, "ghp_exampleexampleexampleexample0123")

	var snippet struct {
		MCPServers map[string]snippetEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(im.Snippet("/bin/toolgate", "/out/toolgate.yaml")), &snippet); err != nil {
		t.Fatal(err)
	}
	e := snippet.MCPServers["toolgate"]
	if len(snippet.MCPServers) != 1 || e.Command != "/bin/toolgate" || strings.Join(e.Args, " ") != "serve --stdio --config /out/toolgate.yaml" {
		t.Errorf("snippet = %+v", snippet)
	}
	if e.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "<GITHUB_PERSONAL_ACCESS_TOKEN>" {
		t.Errorf("Claude Desktop gets a placeholder to fill in, got %q", e.Env["GITHUB_PERSONAL_ACCESS_TOKEN"])
	}

	policy := string(im.Policy())
	for _, want := range []string{
		"p, imported, filesystem/*, call, allow\n", "p, imported, github/*, call, allow\n",
		"p, imported, github/*, read, allow\n", "p, imported, github/*, get, allow\n", "\ng, local, imported\n",
	} {
		if !strings.Contains(policy, want) {
			t.Errorf("policy lacks %q:\n%s", want, policy)
		}
	}
	if !strings.HasPrefix(string(im.ConfigYAML("/out/toolgate.yaml")), "# toolgate configuration, written by `toolgate import` from\n#   "+im.File+" (Claude Desktop)\n") {
		t.Errorf("the config's header does not name the file it came from:\n%s", im.ConfigYAML("/out/toolgate.yaml"))
	}
}

func TestCursorConfig(t *testing.T) {
	im := parseFixture(t, "cursor/.cursor/mcp.json")
	if im.Client != Cursor {
		t.Errorf("client = %q, want %q", im.Client, Cursor)
	}
	cfg := loadConfig(t, im)
	c7 := cfg.Servers["context7"]
	if c7.Transport != config.TransportHTTP || c7.URL != "https://mcp.context7.com/mcp" || c7.Headers["CONTEXT7_API_KEY"] != "value-of-CONTEXT7_API_KEY" {
		t.Errorf("context7 = %s %s %v", c7.Transport, c7.URL, c7.Headers)
	}
	lin := cfg.Servers["linear"]
	if lin.Transport != config.TransportSSE || lin.Headers["Authorization"] != "Bearer value-of-LINEAR_TOKEN" {
		t.Errorf("linear = %s %v; want sse and the scheme kept before the variable", lin.Transport, lin.Headers)
	}
	pg := cfg.Servers["postgres"]
	if got := pg.Args[2]; got != "postgresql://app:value-of-POSTGRES_PASSWORD@localhost:5432/app" {
		t.Errorf("the URL's password is not a variable: %q", got)
	}
	workspace, _ := filepath.Abs("testdata/cursor")
	for k, want := range map[string]string{
		"NODE_ENV":   "production",
		"LOG_DIR":    workspace + "/logs",
		"HOME_CACHE": "/home/you/.cache/pg",
		"PGUSER":     "value-of-PGUSER",
	} {
		if pg.Env[k] != want {
			t.Errorf("postgres env %s = %q, want %q", k, pg.Env[k], want)
		}
	}
	if got := strings.Join(varNames(im), ","); got != "CONTEXT7_API_KEY,LINEAR_TOKEN,PGUSER,POSTGRES_PASSWORD" {
		t.Errorf("vars = %s", got)
	}
	if v := findVar(im, "PGUSER"); v == nil || v.Secret {
		t.Errorf("${env:PGUSER} is the client's own reference, not a secret toolgate hid: %+v", v)
	}
	w := warningsText(im)
	for _, want := range []string{"mcpServers.linear: url ends in /sse", "mcpServers.postgres: ${workspaceFolder} is written as " + workspace} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	noSecrets(t, im, "ctx7sk-example-example-example-0123", "lin_api_exampleexampleexample0123", "s3cretpw")
	snippet := im.Snippet("/bin/toolgate", "/out/toolgate.yaml")
	if !strings.Contains(snippet, `"LINEAR_TOKEN": "${env:LINEAR_TOKEN}"`) {
		t.Errorf("Cursor's snippet passes variables with ${env:NAME}:\n%s", snippet)
	}
}

func TestVSCodeConfig(t *testing.T) {
	im := parseFixture(t, "vscode/.vscode/mcp.json")
	if im.Client != VSCode {
		t.Errorf("client = %q, want %q", im.Client, VSCode)
	}
	cfg := loadConfig(t, im)
	gh := cfg.Servers["github"]
	if gh.Transport != config.TransportHTTP || gh.Headers["Authorization"] != "Bearer value-of-GITHUB_TOKEN" {
		t.Errorf("github = %s %v", gh.Transport, gh.Headers)
	}
	px := cfg.Servers["perplexity"]
	if px.Env["PERPLEXITY_API_KEY"] != "value-of-PERPLEXITY_KEY" {
		t.Errorf("${input:perplexity-key} = %q", px.Env["PERPLEXITY_API_KEY"])
	}
	if px.Env["URL_WITH_SLASHES"] != "http://example.com//not-a-comment" {
		t.Errorf("// inside a string is not a comment: %q", px.Env["URL_WITH_SLASHES"])
	}
	if v := findVar(im, "GITHUB_TOKEN"); v == nil || !v.Secret || v.Input != "github-token" || !strings.Contains(v.From, "GitHub Personal Access Token") {
		t.Errorf("GITHUB_TOKEN = %+v", v)
	}
	w := warningsText(im)
	for _, want := range []string{"mcpServers.perplexity: envFile", "mcpServers.fetch: dev is not imported"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	yaml := string(im.ConfigYAML("/out/toolgate.yaml"))
	if !strings.Contains(yaml, "  # envFile") {
		t.Errorf("a warning is also a comment above its server:\n%s", yaml)
	}
	var snippet struct {
		Servers map[string]snippetEntry `json:"servers"`
		Inputs  []map[string]any        `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(im.Snippet("/bin/toolgate", "/out/toolgate.yaml")), &snippet); err != nil {
		t.Fatal(err)
	}
	e := snippet.Servers["toolgate"]
	if e.Type != "stdio" || e.Env["GITHUB_TOKEN"] != "${input:github-token}" || e.Env["PERPLEXITY_KEY"] != "${input:perplexity-key}" {
		t.Errorf("snippet entry = %+v", e)
	}
	if len(snippet.Inputs) != 2 || snippet.Inputs[0]["id"] != "github-token" {
		t.Errorf("the snippet keeps the inputs it uses: %v", snippet.Inputs)
	}
}

func TestVSCodeSettings(t *testing.T) {
	data := []byte(`{
  "editor.fontSize": 14,
  "mcp": {
    "inputs": [],
    "servers": {
      "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"API_KEY": "k3yk3yk3yk3yk3yAAAA1234"}},
    },
  },
}`)
	im, err := Parse("settings.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if im.Client != VSCodeSettings {
		t.Errorf("client = %q", im.Client)
	}
	loadConfig(t, im)
	snippet := im.Snippet("/bin/toolgate", "/out/toolgate.yaml")
	if !strings.Contains(snippet, `"mcp": {`) || !strings.Contains(snippet, `"API_KEY": "${input:api-key}"`) || !strings.Contains(snippet, `"password": true`) {
		t.Errorf("a literal secret gets a password input in VS Code's snippet:\n%s", snippet)
	}
	noSecrets(t, im, "k3yk3yk3yk3yk3yAAAA1234")
}

// TestSecretsInArguments: a flag named like a credential, --flag=value, a token-shaped argument and a
// URL parameter all become variables; ordinary arguments stay.
func TestSecretsInArguments(t *testing.T) {
	data := []byte(`{"mcpServers": {
  "brave": {"command": "brave-mcp", "args": ["--api-key", "BSAplainvalue", "--token=abc", "--verbose", "sk-proj-abcdefghijklmnop", "--port", "8080"]},
  "tavily": {"url": "https://mcp.tavily.com/mcp/?tavilyApiKey=tvly-abc123&mode=fast", "headers": {"Authorization": "plainvalue", "X-Client": "toolgate"}}
}}`)
	im, err := Parse("mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	got := strings.Join(cfg.Servers["brave"].Args, " ")
	want := "--api-key value-of-BRAVE_API_KEY --token=value-of-BRAVE_TOKEN --verbose value-of-BRAVE_ARG4 --port 8080"
	if got != want {
		t.Errorf("args = %s\nwant   %s", got, want)
	}
	if u := cfg.Servers["tavily"].URL; u != "https://mcp.tavily.com/mcp/?tavilyApiKey=value-of-TAVILY_TAVILYAPIKEY&mode=fast" {
		t.Errorf("url = %s", u)
	}
	if h := cfg.Servers["tavily"].Headers; h["Authorization"] != "value-of-TAVILY_TOKEN" || h["X-Client"] != "toolgate" {
		t.Errorf("headers = %v: Authorization is a secret by its name, X-Client is not", h)
	}
	noSecrets(t, im, "BSAplainvalue", "=abc", "sk-proj-abcdefghijklmnop", "tvly-abc123", "plainvalue")
}

// TestSameNameDifferentSecrets: two servers with the same env name and different values get two
// variables; the same value shares one.
func TestSameNameDifferentSecrets(t *testing.T) {
	data := []byte(`{"mcpServers": {
  "a": {"command": "x", "env": {"API_KEY": "one-one-one"}},
  "b": {"command": "x", "env": {"API_KEY": "two-two-two"}},
  "c": {"command": "x", "env": {"API_KEY": "one-one-one"}}
}}`)
	im, err := Parse("mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	if a, b, c := cfg.Servers["a"].Env["API_KEY"], cfg.Servers["b"].Env["API_KEY"], cfg.Servers["c"].Env["API_KEY"]; a != "value-of-API_KEY" || b != "value-of-B_API_KEY" || c != a {
		t.Errorf("a=%s b=%s c=%s", a, b, c)
	}
}

// TestClientVariablesAndDollars: a variable toolgate cannot fill in is a warning and stays literal, and
// a literal ${ survives toolgate's own expansion.
func TestClientVariablesAndDollars(t *testing.T) {
	data := []byte(`{"servers": {"s": {"type": "stdio", "command": "run", "args": ["${config:editor.tabSize}", "$HOME", "${unterminated", "${userHome}/x", "${pathSeparator}"]}}}`)
	im, err := Parse("/tmp/elsewhere/mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	got := cfg.Servers["s"].Args
	want := []string{"${config:editor.tabSize}", "$HOME", "${unterminated", "/home/you/x", "/"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("args = %q, want %q", got, want)
	}
	if !strings.Contains(warningsText(im), "${config:editor.tabSize} is a client variable toolgate cannot fill in") {
		t.Errorf("warnings:\n%s", warningsText(im))
	}
}

// TestFieldsToolgateCannotExpress: each is a warning naming the field, never a silent drop.
func TestFieldsToolgateCannotExpress(t *testing.T) {
	data := []byte(`{"mcpServers": {
  "cline": {"command": "x", "autoApprove": ["read"], "disabled": true, "timeout": 60, "headers": {"X-A": "b"}, "transportType": "stdio"},
  "remote": {"url": "https://example.com/mcp", "type": "websocket", "env": {"A": "b"}, "args": ["--x"]}
}}`)
	im, err := Parse("mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	if !cfg.Servers["cline"].Disabled {
		t.Error("disabled: true is carried over")
	}
	w := warningsText(im)
	for _, want := range []string{
		"mcpServers.cline: autoApprove is not imported",
		"mcpServers.cline: timeout is not imported",
		"mcpServers.cline: headers are not imported",
		`mcpServers.cline: transportType is not imported: toolgate has no such server setting (the value was "stdio")`,
		`mcpServers.remote: type "websocket" is not one toolgate knows`,
		"mcpServers.remote: env is not imported",
		"mcpServers.remote: args are not imported",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

// TestCommandLinesAndRelativePaths: a command line is split into program and arguments; relative paths
// are resolved against the workspace when the file is in one, and are a warning otherwise.
func TestCommandLinesAndRelativePaths(t *testing.T) {
	data := []byte(`{"servers": {
  "line": {"command": "npx -y @scope/server", "args": ["--flag"]},
  "local": {"command": "./bin/server", "cwd": "tools"}
}}`)
	im, err := Parse("/work/proj/.vscode/mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	if s := cfg.Servers["line"]; s.Command != "npx" || strings.Join(s.Args, " ") != "-y @scope/server --flag" {
		t.Errorf("line = %q %q", s.Command, s.Args)
	}
	if s := cfg.Servers["local"]; s.Command != "/work/proj/bin/server" || s.Cwd != "/work/proj/tools" {
		t.Errorf("local = %q in %q", s.Command, s.Cwd)
	}
	im, err = Parse("/home/you/claude_desktop_config.json", []byte(`{"mcpServers": {"local": {"command": "bin/server"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warningsText(im), `mcpServers.local: command "bin/server" is relative: toolgate resolves it against the folder of toolgate.yaml`) {
		t.Errorf("warnings:\n%s", warningsText(im))
	}
	_, err = Parse("mcp.json", []byte(`{"mcpServers": {"q": {"command": "node \"my server.js\""}}}`))
	wantErr(t, err, `mcp.json: mcpServers["q"]: command "node \"my server.js\"" is a command line with quoting; put the program in command and its arguments in args`)
}

// TestWarningsNeverQuoteSecrets: the value of an unknown field is shown only when it cannot be a
// credential; a header toolgate cannot send is a warning.
func TestWarningsNeverQuoteSecrets(t *testing.T) {
	data := []byte(`{"mcpServers": {"s": {"url": "https://example.com/mcp", "apiKey": "short1", "note": "ghp_abcdefghijklmnop1234", "retries": 3, "oauth": {"clientSecret": "x"}, "headers": {"Bad Header": "v"}}}}`)
	im, err := Parse("mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	loadConfig(t, im)
	w := warningsText(im)
	for _, want := range []string{
		"apiKey is not imported: toolgate has no such server setting (the value was a string)",
		"note is not imported: toolgate has no such server setting (the value was a string)",
		"retries is not imported: toolgate has no such server setting (the value was 3)",
		"oauth is not imported: toolgate has no such server setting (the value was an object)",
		`header "Bad Header" is not imported: it is not a valid HTTP header name`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	noSecrets(t, im, "short1", "ghp_abcdefghijklmnop1234")
}

func TestNormalizedNames(t *testing.T) {
	data := []byte(`{"mcpServers": {"GitHub Server": {"command": "x"}, "my__tool": {"command": "y"}, "weather.api": {"command": "z"}}}`)
	im, err := Parse("mcp.json", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	if got := strings.Join(cfg.ServerNames(), ","); got != "GitHub-Server,my_tool,weather-api" {
		t.Errorf("names = %s", got)
	}
	if !strings.Contains(warningsText(im), `mcpServers.GitHub-Server: renamed from "GitHub Server"`) {
		t.Errorf("a rename is a warning:\n%s", warningsText(im))
	}
}

func TestParseNotJSON(t *testing.T) {
	_, err := Parse("toolgate.yaml", []byte("mcpServers:\n  a: {command: x}\n"))
	wantErr(t, err, "toolgate.yaml: not valid JSON (line 1, column 1): invalid character 'm' looking for beginning of value")
}

func TestParseBrokenJSONSaysWhere(t *testing.T) {
	_, err := Parse("mcp.json", []byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}"))
	wantErr(t, err, "mcp.json: not valid JSON (line 4, column 5): invalid character '\"' after object key:value pair")
}

func TestParseEmptyFile(t *testing.T) {
	_, err := Parse("mcp.json", []byte(" \n"))
	wantErr(t, err, "mcp.json: the file is empty")
}

func TestParseNotAnObject(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`[{"command": "x"}]`))
	wantErr(t, err, "mcp.json: not a JSON object: a client config is JSON with mcpServers (Claude Desktop, Cursor) or servers (VS Code) at the top")
}

func TestParseNoServers(t *testing.T) {
	_, err := Parse("claude_desktop_config.json", []byte(`{"preferences": {"menuBarEnabled": false}, "globalShortcut": ""}`))
	wantErr(t, err, `claude_desktop_config.json: no servers to import: expected mcpServers (Claude Desktop, Cursor), servers (VS Code mcp.json) or mcp.servers (VS Code settings.json) at the top, found "globalShortcut", "preferences"`)
}

func TestParseEmptyServerList(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"servers": {}, "inputs": []}`))
	wantErr(t, err, "mcp.json: servers is empty: there are no servers to import")
}

func TestParseServerListNotAnObject(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": [{"command": "x"}]}`))
	wantErr(t, err, "mcp.json: mcpServers: expected an object of server names to servers, got a list")
}

func TestParseNamesCollideAfterNormalization(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"my.server": {"command": "x"}, "my-server": {"command": "y"}}}`))
	wantErr(t, err, `mcp.json: servers "my-server" and "my.server" would both be named "my-server" in toolgate (server names are 1 to 64 of A-Z a-z 0-9 _ - without "__"); rename one of them in the client file first`)
}

func TestParseNameWithNothingUsable(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"日本": {"command": "x"}}}`))
	wantErr(t, err, `mcp.json: mcpServers["日本"]: no usable toolgate server name in "日本" (server names are 1 to 64 of A-Z a-z 0-9 _ -); rename it in the client file`)
}

func TestParseServerWithoutCommandOrURL(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"empty": {"args": ["x"], "env": {}}}}`))
	wantErr(t, err, `mcp.json: mcpServers["empty"]: has neither command (a local server) nor url (a remote one), so there is nothing to connect to`)
}

func TestParseServerWithCommandAndURL(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"servers": {"both": {"command": "x", "url": "https://example.com/mcp"}}}`))
	wantErr(t, err, `mcp.json: servers["both"]: has both command (a local server) and url (a remote one); keep one`)
}

func TestParseServerNotAnObject(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"s": "npx server"}}`))
	wantErr(t, err, `mcp.json: mcpServers["s"]: expected an object with command (a local server) or url (a remote one)`)
}

func TestParseArgsNotStrings(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"s": {"command": "x", "args": ["--opts", {"a": 1}]}}}`))
	wantErr(t, err, `mcp.json: mcpServers["s"]: args[1]: expected a string, got an object`)
}

func TestParseBothLists(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"command": "y"}}}`))
	wantErr(t, err, "mcp.json: has both mcpServers (Claude Desktop, Cursor) and servers (VS Code); import one list at a time")
}

// TestErrorsNeverQuoteValues: a value of the wrong type may be a secret; messages name its type only.
func TestErrorsNeverQuoteValues(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers": {"s": {"command": "x", "env": {"TOKEN": ["ghp_secretsecretsecret"]}}}}`))
	wantErr(t, err, `mcp.json: mcpServers["s"]: env["TOKEN"]: expected a string, got a list`)
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
}

// TestImportAllowsTheLocalServersItFinds: a client's server on localhost or a private address is
// imported with egress.allow naming its class, so the generated config loads and says so explicitly; a
// public host or a host name gets no egress line.
func TestImportAllowsTheLocalServersItFinds(t *testing.T) {
	im, err := Parse("claude_desktop_config.json", []byte(`{"mcpServers": {
  "local": {"url": "http://localhost:3001/mcp"},
  "lan": {"url": "http://192.168.1.20:8080/mcp"},
  "named": {"url": "https://mcp.example.com/mcp"}
}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, im)
	for name, want := range map[string]string{"local": "[loopback] []", "lan": "[private] []", "named": "[] []"} {
		if got := fmt.Sprint(cfg.Servers[name].EgressAllow()); got != want {
			t.Errorf("%s: egress.allow = %s, want %s", name, got, want)
		}
	}
	if yaml := string(im.ConfigYAML("/out/toolgate.yaml")); !strings.Contains(yaml, "    egress: {allow: [loopback]}   # localhost is a loopback address") {
		t.Errorf("the egress line does not say why:\n%s", yaml)
	}
}
