package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Two published servers toolgate did not write, npm
// @modelcontextprotocol/server-filesystem (on a temp dir) and
// @modelcontextprotocol/server-memory (its graph in a temp file), run as
// stdio upstreams and are driven by the official TypeScript SDK client over
// Streamable HTTP (e2e/ts/published.mjs).
//
// The policy lets alice (role agent) call the read-only tools and the writes
// that only add (create_directory, create_entities, create_relations);
// write_file, edit_file, move_file and the three memory deletes are named
// nowhere, so default deny keeps them from her. The test proves:
//   - alice's tools/list is exactly the allowed set, and none of it is a tool
//     the upstream itself marks destructiveHint;
//   - reads return the upstream's data inside the envelope;
//   - each destructive call answers a tool_not_allowed envelope, and the file
//     and the graph on disk are byte-for-byte / entity-for-entity unchanged,
//     while her allowed writes did land;
//   - the control: bob (role maintainer, every tool) sends the very same
//     destructive calls and they succeed and change the disk, so the
//     arguments were valid and it was the policy that protected the data.
//
// Needs node and `npm install` in e2e/ts (see TestTypeScriptSDKClient).
func TestPublishedServersBehindToolgate(t *testing.T) {
	node, script, fsBin, memBin := publishedTools(t)

	root := t.TempDir()
	notes := filepath.Join(root, "notes.txt")
	moved := filepath.Join(root, "moved.txt")
	const notesText = "hello from the toolgate e2e test\nsecond line\n"
	write(t, notes, notesText)

	memFile := filepath.Join(t.TempDir(), "memory.jsonl")
	write(t, memFile, strings.Join([]string{
		`{"type":"entity","name":"toolgate","entityType":"project","observations":["is an MCP gateway","enforces a Casbin policy"]}`,
		`{"type":"entity","name":"Casbin","entityType":"library","observations":["decides who may call what"]}`,
		`{"type":"relation","from":"toolgate","to":"Casbin","relationType":"uses"}`,
	}, "\n"))
	seeded := readGraph(t, memFile)

	url, _ := httpGateway(t, publishedConfig(t, root, fsBin, memFile, memBin))

	destructive := []pubStep{
		{"fs__edit_file", map[string]any{"path": notes, "edits": []any{map[string]any{"oldText": "hello", "newText": "goodbye"}}}},
		{"fs__write_file", map[string]any{"path": notes, "content": "overwritten through toolgate\n"}},
		{"fs__move_file", map[string]any{"source": notes, "destination": moved}},
		{"memory__delete_observations", map[string]any{"deletions": []any{map[string]any{"entityName": "toolgate", "observations": []any{"enforces a Casbin policy"}}}}},
		{"memory__delete_relations", map[string]any{"relations": []any{map[string]any{"from": "toolgate", "to": "Casbin", "relationType": "uses"}}}},
		{"memory__delete_entities", map[string]any{"entityNames": []any{"Casbin"}}},
	}

	// Phase 1: alice reads, is refused every destructive call, reads again,
	// then makes the writes she is allowed.
	reads := []pubStep{
		{"fs__read_text_file", map[string]any{"path": notes}},
		{"fs__list_directory", map[string]any{"path": root}},
		{"memory__read_graph", map[string]any{}},
		{"memory__search_nodes", map[string]any{"query": "Casbin"}},
	}
	after := []pubStep{
		{"fs__read_text_file", map[string]any{"path": notes}},
		{"memory__open_nodes", map[string]any{"names": []any{"toolgate"}}},
		{"fs__create_directory", map[string]any{"path": filepath.Join(root, "made")}},
		{"memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "alice-note", "entityType": "note", "observations": []any{"written through toolgate"}}}}},
		{"memory__create_relations", map[string]any{"relations": []any{map[string]any{"from": "alice-note", "to": "toolgate", "relationType": "describes"}}}},
	}
	plan := slices.Concat(reads, destructive, after)
	alice := runPublished(t, node, script, url, aliceKey, plan)

	// tools/list: exactly what the policy allows, nothing the upstream calls destructive.
	var aliceTools []string
	for _, tool := range alice.Tools {
		aliceTools = append(aliceTools, tool.Name)
		if tool.DestructiveHint != nil && *tool.DestructiveHint {
			t.Errorf("alice is offered %s, which the upstream marks destructive", tool.Name)
		}
	}
	slices.Sort(aliceTools)
	if want := publishedAllowed(); !slices.Equal(aliceTools, want) {
		t.Errorf("alice's tools:\n got %v\nwant %v", aliceTools, want)
	}

	if len(alice.Calls) != len(plan) {
		t.Fatalf("%d calls answered, want %d", len(alice.Calls), len(plan))
	}
	okData := func(i int) map[string]any {
		t.Helper()
		c := alice.Calls[i]
		if c.Name != plan[i].Tool || c.IsError || c.StructuredContent["ok"] != true {
			t.Fatalf("call %d %s: isError=%v envelope=%v text=%q, want ok", i, plan[i].Tool, c.IsError, c.StructuredContent, c.Text)
		}
		data, _ := c.StructuredContent["data"].(map[string]any)
		return data
	}
	// Reads: the upstream's structured data, inside the envelope.
	if got := okData(0)["content"]; got != notesText {
		t.Errorf("read_text_file: data.content %q, want %q", got, notesText)
	}
	if got := fmt.Sprint(okData(1)["content"]); !strings.Contains(got, "[FILE] notes.txt") {
		t.Errorf("list_directory: data.content %q lacks [FILE] notes.txt", got)
	}
	if got := entityNames(okData(2)); !slices.Equal(got, []string{"Casbin", "toolgate"}) {
		t.Errorf("read_graph: entities %v, want [Casbin toolgate]", got)
	}
	if rels, _ := okData(2)["relations"].([]any); len(rels) != 1 {
		t.Errorf("read_graph: relations %v, want the one seeded", rels)
	}
	if got := entityNames(okData(3)); !slices.Contains(got, "Casbin") {
		t.Errorf("search_nodes Casbin: entities %v", got)
	}
	// Destructive: refused by policy, with the documented envelope.
	for i := len(reads); i < len(reads)+len(destructive); i++ {
		c := alice.Calls[i]
		env := c.StructuredContent
		if !c.IsError || env["ok"] != false || env["error_code"] != "tool_not_allowed" || env["data"] != nil || env["retryable"] != false {
			t.Errorf("%s as alice: isError=%v envelope=%v, want a tool_not_allowed envelope", c.Name, c.IsError, env)
		}
		if !strings.HasPrefix(c.Text, "tool_not_allowed: ") {
			t.Errorf("%s as alice: text %q, want \"tool_not_allowed: ...\"", c.Name, c.Text)
		}
	}
	// Reading again through the gateway sees the data untouched...
	n := len(reads) + len(destructive)
	if got := okData(n)["content"]; got != notesText {
		t.Errorf("read_text_file after the refused writes: %q, want %q", got, notesText)
	}
	if ents, _ := okData(n + 1)["entities"].([]any); len(ents) != 1 || !strings.Contains(fmt.Sprint(ents[0]), "enforces a Casbin policy") {
		t.Errorf("open_nodes toolgate after the refused deletes: %v", ents)
	}
	// ...and the allowed writes went through.
	for i := n + 2; i < len(plan); i++ {
		okData(i)
	}

	// On disk: the file and the graph as seeded, plus only alice's additions.
	if b, err := os.ReadFile(notes); err != nil || string(b) != notesText {
		t.Errorf("notes.txt after alice: %q, %v; want it unchanged", b, err)
	}
	if _, err := os.Stat(moved); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("moved.txt exists after a refused move_file (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(root, "made")); err != nil || !fi.IsDir() {
		t.Errorf("create_directory (allowed) did not create the directory: %v", err)
	}
	want := seeded
	want.Entities = append(want.Entities, pubEntity{Name: "alice-note", EntityType: "note", Observations: []string{"written through toolgate"}})
	want.Relations = append(want.Relations, pubRelation{From: "alice-note", To: "toolgate", RelationType: "describes"})
	if got := readGraph(t, memFile); !got.equal(want) {
		t.Errorf("memory graph after alice:\n got %+v\nwant %+v", got, want)
	}

	// Phase 2, the control: the same destructive calls as bob, who may.
	bob := runPublished(t, node, script, url, bobKey, destructive)
	var bobTools []string
	for _, tool := range bob.Tools {
		bobTools = append(bobTools, tool.Name)
		isDestructive := tool.DestructiveHint != nil && *tool.DestructiveHint
		if isDestructive != slices.ContainsFunc(destructive, func(s pubStep) bool { return s.Tool == tool.Name }) {
			t.Errorf("%s: upstream destructiveHint=%v, but the test's destructive list says otherwise", tool.Name, isDestructive)
		}
	}
	if len(bobTools) != 14+9 {
		t.Errorf("bob (every tool) sees %d tools, want 14 filesystem + 9 memory: %v", len(bobTools), bobTools)
	}
	for i, c := range bob.Calls {
		if c.IsError || c.StructuredContent["ok"] != true {
			t.Errorf("%s as bob: isError=%v envelope=%v text=%q, want ok", destructive[i].Tool, c.IsError, c.StructuredContent, c.Text)
		}
	}
	if _, err := os.Stat(notes); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("notes.txt still there after bob's move_file (%v)", err)
	}
	if b, err := os.ReadFile(moved); err != nil || string(b) != "overwritten through toolgate\n" {
		t.Errorf("moved.txt after bob: %q, %v", b, err)
	}
	want = pubGraph{
		Entities: []pubEntity{
			{Name: "toolgate", EntityType: "project", Observations: []string{"is an MCP gateway"}},
			{Name: "alice-note", EntityType: "note", Observations: []string{"written through toolgate"}},
		},
		Relations: []pubRelation{{From: "alice-note", To: "toolgate", RelationType: "describes"}},
	}
	if got := readGraph(t, memFile); !got.equal(want) {
		t.Errorf("memory graph after bob:\n got %+v\nwant %+v", got, want)
	}
}

// publishedTools finds node, the script and the two servers' binaries, or
// skips (fails under TOOLGATE_REQUIRE_NODE=1, as .ci/run sets it).
func publishedTools(t *testing.T) (node, script, fsBin, memBin string) {
	t.Helper()
	script, _ = filepath.Abs("../../e2e/ts/published.mjs")
	fsBin, _ = filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-filesystem")
	memBin, _ = filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-memory")
	node, err := exec.LookPath("node")
	errs := []error{err}
	for _, p := range []string{"../../e2e/ts/node_modules/@modelcontextprotocol/sdk", fsBin, memBin} {
		_, err := os.Stat(p)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("node or the published servers in e2e/ts/node_modules missing: %v", err)
		}
		t.Skip("node or e2e/ts/node_modules missing: run npm install in e2e/ts")
	}
	return node, script, fsBin, memBin
}

// publishedConfig is writeConfig for the two published servers, whose
// entries carry their own command, args and env, with a policy of its own
// in place of testPolicy.
func publishedConfig(t *testing.T, root, fsBin, memFile, memBin string) string {
	t.Helper()
	cfg := writeConfig(t, fmt.Sprintf(`  fs:
    command: %q
    args: [%q]
    init_timeout: 30s
  memory:
    command: %q
    env: {MEMORY_FILE_PATH: %q}
    init_timeout: 30s
`, fsBin, root, memBin, memFile))
	var policy strings.Builder
	policy.WriteString("# agent: read-only tools and writes that only add. Destructive tools are\n# named nowhere: default deny.\n")
	for _, name := range publishedAllowed() {
		server, tool, _ := strings.Cut(name, "__")
		fmt.Fprintf(&policy, "p, agent, %s/%s, call, allow\n", server, tool)
	}
	policy.WriteString("# maintainer: everything (the control).\np, maintainer, fs/*, call, allow\np, maintainer, memory/*, call, allow\n")
	policy.WriteString("g, alice, agent\ng, bob, maintainer\n")
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), policy.String())
	return cfg
}

// publishedAllowed is the agent's tools, client-facing names, sorted.
func publishedAllowed() []string {
	names := []string{
		// server-filesystem: everything readOnlyHint, and create_directory.
		"fs__read_file", "fs__read_text_file", "fs__read_media_file", "fs__read_multiple_files",
		"fs__list_directory", "fs__list_directory_with_sizes", "fs__directory_tree",
		"fs__search_files", "fs__get_file_info", "fs__list_allowed_directories",
		"fs__create_directory",
		// server-memory: the three reads, and the three writes that only add.
		"memory__read_graph", "memory__search_nodes", "memory__open_nodes",
		"memory__create_entities", "memory__create_relations", "memory__add_observations",
	}
	slices.Sort(names)
	return names
}

type pubStep struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

type pubResult struct {
	Tools []struct {
		Name            string `json:"name"`
		ReadOnlyHint    *bool  `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint"`
	} `json:"tools"`
	Calls []struct {
		Name              string         `json:"name"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Text              string         `json:"text"`
	} `json:"calls"`
}

// runPublished runs published.mjs: one SDK session as key, the plan's calls in order.
func runPublished(t *testing.T, node, script, url, key string, plan []pubStep) pubResult {
	t.Helper()
	planJSON, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, script, url, key, string(planJSON))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("published.mjs as %s: %v\n%s", key, err, stderr.Bytes())
	}
	var res pubResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("published.mjs output %q: %v", stdout.Bytes(), err)
	}
	return res
}

type pubEntity struct {
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
}

type pubRelation struct {
	From         string `json:"from"`
	To           string `json:"to"`
	RelationType string `json:"relationType"`
}

type pubGraph struct {
	Entities  []pubEntity
	Relations []pubRelation
}

// equal compares two graphs regardless of line order.
func (g pubGraph) equal(o pubGraph) bool {
	key := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	set := func(g pubGraph) []string {
		var s []string
		for _, e := range g.Entities {
			s = append(s, key(e))
		}
		for _, r := range g.Relations {
			s = append(s, key(r))
		}
		slices.Sort(s)
		return s
	}
	return slices.Equal(set(g), set(o))
}

// readGraph parses server-memory's JSONL file: one entity or relation a line.
func readGraph(t *testing.T, path string) pubGraph {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g pubGraph
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var kind struct{ Type string }
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		switch kind.Type {
		case "entity":
			var e pubEntity
			_ = json.Unmarshal([]byte(line), &e)
			g.Entities = append(g.Entities, e)
		case "relation":
			var r pubRelation
			_ = json.Unmarshal([]byte(line), &r)
			g.Relations = append(g.Relations, r)
		default:
			t.Fatalf("%s: unknown line %q", path, line)
		}
	}
	return g
}

// entityNames is the sorted names of data.entities.
func entityNames(data map[string]any) []string {
	ents, _ := data["entities"].([]any)
	var names []string
	for _, e := range ents {
		m, _ := e.(map[string]any)
		names = append(names, fmt.Sprint(m["name"]))
	}
	slices.Sort(names)
	return names
}
