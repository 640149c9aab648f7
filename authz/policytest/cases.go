// Package policytest runs a table of policy test cases, for `toolgate policy test`: each case
// names a caller (a principal, roles, a JWT's claims), a tool, resource or prompt, the arguments,
// and the decision the policy is expected to give (allow, deny, or approval), and optionally the
// policy line expected to decide.
//
// # Why a package of its own
//
// A policy edit is a code change without a test suite: `toolgate check` says the file loads and
// `toolgate explain` answers one question, but nothing says the questions that matter still get
// the same answers. A case file is that suite, kept beside policy.csv in the policy's repository
// and run by its CI. The gateway never runs it, so it lives beside package authz (like
// authz/explain, whose explanation it prints for a failed case) rather than in it, and it knows
// nothing of toolgate.yaml: the command builds an [Env] from the configuration, so the same
// runner serves a test with a hand-made policy.
//
// # Agreement with the gateway
//
// The decision is [authz.Policy.Decide] and, for an allowed call, [authz.Policy.ApprovalRule],
// which are what the gateway's authorize, conditions and approve links ask. With the real
// catalog ([Env.Catalog]), a tool must exist and a case's arguments go through the tool's input
// schema first, as the validate link does: arguments it refuses are a deny (invalid_arguments)
// before any condition sees them. Without the catalog those two checks are skipped, and the
// runner says so; conditions on arguments are evaluated either way.
//
// A principal neither the configuration nor the policy knows is a failed case, never a silent
// deny: it is nearly always a misspelling, and a case expecting deny would pass on it.
package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// The decisions a case may expect.
const (
	Allow    = "allow"    // Decide allows, and no approval line applies
	Deny     = "deny"     // Decide denies (or, with the catalog, the schema refuses the arguments)
	Approval = "approval" // Decide allows, and an a line makes the call wait for a human approval
	// InsufficientScope: Decide allows, but the case's token (its claims' scope or scp) lacks a scope
	// the s lines require: the gateway answers HTTP 403 with an insufficient_scope challenge.
	InsufficientScope = "insufficient_scope"
)

// NoRule is the rule a case expects when no line decides: denied by default.
const NoRule = "none"

// File is a case file.
type File struct {
	Path  string
	Cases []Case
}

// Case is one policy test case, as written in the file.
type Case struct {
	Name string `yaml:"name"`
	// Principal is who calls; with Claims it may be left out (the principal claim names it).
	Principal string `yaml:"principal"`
	// Roles are roles the credential grants for the call (a JWT roles claim), on top of g lines.
	Roles []string `yaml:"roles"`
	// Claims are a JWT's claims, mapped as the gateway maps them (auth.jwt principal_claim,
	// roles_claim, attribute_claims, and the scope or scp claim: a case with claims is a token
	// caller, limited by the policy's s lines).
	Claims map[string]any `yaml:"claims"`
	// Attributes are principal attributes for conditions (principal.<name>); they override the
	// attributes of the principal's API key and of Claims.
	Attributes map[string]string `yaml:"attributes"`
	// Exactly one of Tool (client-facing or <server>/<tool>), Resource (<server>/<uri>) and Prompt
	// (<server>/<prompt>).
	Tool     string `yaml:"tool"`
	Resource string `yaml:"resource"`
	Prompt   string `yaml:"prompt"`
	// Action defaults to call, read or get for a tool, resource or prompt.
	Action string         `yaml:"action"`
	Args   map[string]any `yaml:"args"`
	// Expect is allow, deny or approval.
	Expect string `yaml:"expect"`
	// Rule, optional, is the line expected to decide, "file:line" as `toolgate explain` prints it
	// (the file may be given by its base name, policy.csv:12), or "none" for no line. For an
	// approval it is the a line.
	Rule string `yaml:"rule"`

	// Line is where the case starts in the file.
	Line int `yaml:"-"`
}

// fileShape is the file's top level.
type fileShape struct {
	Cases []Case `yaml:"cases"`
}

// LoadError is a problem with the case file itself, "file:line: what is wrong".
type LoadError struct {
	File string
	Line int
	Msg  string
}

func (e *LoadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Load reads and parses a case file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &LoadError{File: path, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	return Parse(path, data)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse decodes a case file strictly: an unknown key, a duplicate key, a value of the wrong type
// is an error naming file:line, and so is a case that misses its name, its object or its expected
// decision. Every case problem is reported, joined into one error.
func Parse(path string, data []byte) (*File, error) {
	var shape fileShape
	if err := yaml.UnmarshalWithOptions(data, &shape, yaml.Strict()); err != nil {
		return nil, yamlError(path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 || len(shape.Cases) == 0 {
		return nil, &LoadError{File: path, Msg: "no cases: expected a top-level \"cases:\" list"}
	}
	lines := caseLines(data, len(shape.Cases))
	f := &File{Path: path, Cases: shape.Cases}
	var errs []error
	names := map[string]int{}
	for i := range f.Cases {
		c := &f.Cases[i]
		c.Line = lines[i]
		for _, msg := range c.problems() {
			errs = append(errs, &LoadError{File: path, Line: c.Line, Msg: fmt.Sprintf("case %d (%q): %s", i+1, c.Name, msg)})
		}
		if c.Name != "" {
			if first, dup := names[c.Name]; dup {
				errs = append(errs, &LoadError{File: path, Line: c.Line, Msg: fmt.Sprintf("case name %q is used twice (also at line %d): a failure must name one case", c.Name, first)})
			} else {
				names[c.Name] = c.Line
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// problems are what is wrong with one decoded case.
func (c *Case) problems() []string {
	var out []string
	if strings.TrimSpace(c.Name) == "" {
		out = append(out, "no name: give every case a name, which a failure reports")
	}
	if c.Principal == "" && c.Claims == nil {
		out = append(out, "no principal: give principal (or claims, whose principal claim names it)")
	}
	n := 0
	for _, s := range []string{c.Tool, c.Resource, c.Prompt} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		out = append(out, "expected exactly one of tool, resource and prompt")
	}
	if c.Resource != "" && !strings.Contains(c.Resource, "/") {
		out = append(out, fmt.Sprintf("resource %q: expected <server>/<resource URI>", c.Resource))
	}
	if c.Prompt != "" && !strings.Contains(c.Prompt, "/") {
		out = append(out, fmt.Sprintf("prompt %q: expected <server>/<prompt>", c.Prompt))
	}
	switch c.Expect {
	case Allow, Deny, Approval, InsufficientScope:
	case "":
		out = append(out, "no expect: expected allow, deny, approval or insufficient_scope")
	default:
		out = append(out, fmt.Sprintf("expect %q: expected allow, deny, approval or insufficient_scope", c.Expect))
	}
	if c.Rule != "" && c.Rule != NoRule && !strings.Contains(c.Rule, ":") {
		out = append(out, fmt.Sprintf("rule %q: expected file:line as toolgate explain prints it (policy.csv:12), or none", c.Rule))
	}
	if c.Args != nil {
		if _, err := json.Marshal(c.Args); err != nil {
			out = append(out, fmt.Sprintf("args cannot be written as JSON: %v", err))
		}
	}
	return out
}

// action is the case's action, defaulted by the kind of object.
func (c *Case) action() string {
	switch {
	case c.Action != "":
		return c.Action
	case c.Resource != "":
		return "read"
	case c.Prompt != "":
		return "get"
	}
	return "call"
}

// argsJSON is the case's arguments as the JSON a client would send (nil without args).
func (c *Case) argsJSON() json.RawMessage {
	if c.Args == nil {
		return nil
	}
	b, _ := json.Marshal(c.Args) // checked by problems
	return b
}

// yamlError turns a YAML decoding error into file:line: message.
func yamlError(path string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
		return &LoadError{File: path, Line: ye.GetToken().Position.Line, Msg: ye.GetMessage()}
	}
	return &LoadError{File: path, Msg: err.Error()}
}

// caseLines is the line of each case in the file (0 when it cannot be found).
func caseLines(data []byte, n int) []int {
	out := make([]int, n)
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return out
	}
	for i := range out {
		p, err := yaml.PathString(fmt.Sprintf("$.cases[%d]", i))
		if err != nil {
			continue
		}
		node, err := p.FilterFile(f)
		if err != nil || node == nil {
			continue
		}
		if tk := node.GetToken(); tk != nil && tk.Position != nil {
			out[i] = tk.Position.Line
		}
	}
	return out
}
