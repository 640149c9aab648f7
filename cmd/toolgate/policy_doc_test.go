package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// policyDoc holds the explain example TestPolicyDocExplain runs, relative
// to the repository.
const policyDoc = "docs/policy.md"

var fencedBlockRE = regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```$")

// TestPolicyDocExplain runs the `toolgate explain` example of docs/policy.md
// against the repository's own toolgate.yaml and policy.csv, and compares
// what explain prints with the document's block, line for line and space
// for space, and the exit status with its decision (0 allow, 1 deny).
//
// The block is a command line (`$ toolgate explain ...`, continued by a
// trailing backslash) followed by the output. What the test substitutes,
// and nothing else: the directory of the command's --config (the
// document's example path for a checkout of this repository) becomes the
// repository's, in the command and in the output, where explain names each
// policy line by the policy file's absolute path.
func TestPolicyDocExplain(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t)) // the repo config's demo upstream refers to it
	doc := mustRead(t, "../../"+policyDoc)
	var blocks []string
	for _, m := range fencedBlockRE.FindAllStringSubmatch(doc, -1) {
		if strings.HasPrefix(m[1], "$ toolgate explain ") {
			blocks = append(blocks, m[1])
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("%s has %d code blocks starting with `$ toolgate explain`, want 1", policyDoc, len(blocks))
	}
	lines := strings.SplitAfter(blocks[0], "\n")
	n := 1
	for n < len(lines) && strings.HasSuffix(lines[n-1], "\\\n") {
		n++
	}
	command := strings.TrimPrefix(strings.Join(lines[:n], ""), "$ ")
	want := strings.Join(lines[n:], "")

	cmds := shellCommands(t, command)
	if len(cmds) != 1 || len(cmds[0]) < 2 || cmds[0][0] != "toolgate" || cmds[0][1] != "explain" {
		t.Fatalf("command %q: want one `toolgate explain ...`", command)
	}
	args := slices.Clone(cmds[0][2:])
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docRoot := root
	if i := slices.Index(args, "--config"); i < 0 {
		// As if run in the repository: explain reads ./toolgate.yaml.
		args = append([]string{"--config", filepath.Join(root, "toolgate.yaml")}, args...)
	} else {
		if i+1 >= len(args) || !filepath.IsAbs(args[i+1]) || filepath.Base(args[i+1]) != "toolgate.yaml" {
			t.Fatalf("command %q: want --config with the absolute path of a toolgate.yaml", command)
		}
		docRoot = filepath.Dir(args[i+1])
		args[i+1] = filepath.Join(root, "toolgate.yaml")
		want = strings.ReplaceAll(want, docRoot+string(filepath.Separator), root+string(filepath.Separator))
	}

	var out bytes.Buffer
	var code int
	errOut := captureStderr(t, func() { code = explain(args, &out) })
	if out.String() != want || errOut != "" {
		t.Errorf("%s: explain prints\n%s%s\nthe document shows (its %s read as %s)\n%s", policyDoc, out.String(), errOut, docRoot, root, want)
	}
	wantCode := 0
	if strings.HasPrefix(want, "decision: deny") {
		wantCode = 1
	}
	if code != wantCode {
		t.Errorf("exit status %d, want %d for the document's decision", code, wantCode)
	}
}
