package authz

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"strings"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
)

// ActCall is the action of a tools/call, the only action the gateway asks about today.
const ActCall = "call"

// knownActs are the actions a policy line may name. A deny line whose action is misspelled would
// silently never apply, so an unknown action is a load error rather than a dead rule.
var knownActs = map[string]bool{ActCall: true}

// Effects a policy line may carry. Casbin compares them case-sensitively: "Allow" would silently
// mean "not allow", and "Deny" would silently not deny.
const (
	effectAllow = "allow"
	effectDeny  = "deny"
)

// LoadError is a problem found while loading a model or policy file. Line is 1-based, or 0
// when the problem is not tied to one line.
type LoadError struct {
	File   string
	Line   int
	Reason string
}

func (e *LoadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Reason)
}

// policyLine is one rule of a policy file, as Casbin's CSV loader will read it.
type policyLine struct {
	num    int      // 1-based line number in the file
	text   string   // the line, trimmed, exactly as handed to Casbin
	fields []string // ptype first ("p", "g", ...), then the rule
}

// splitLines yields the lines of a policy file the way Casbin's file adapter does (bufio.Scanner,
// CR LF tolerated, each line trimmed), with 1-based numbers. A leading UTF-8 BOM is dropped.
func splitLines(data []byte) ([]policyLine, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var out []policyLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		out = append(out, policyLine{num: n, text: strings.TrimSpace(sc.Text())})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("after line %d: %w", n, err)
	}
	return out, nil
}

// isSkipped mirrors persist.LoadPolicyLine: blank lines and lines starting with "#" are ignored.
func isSkipped(line string) bool {
	return line == "" || strings.HasPrefix(line, "#")
}

// splitFields parses one rule line with the same CSV settings as persist.LoadPolicyLine.
func splitFields(line string) ([]string, error) {
	r := csv.NewReader(strings.NewReader(line))
	r.Comma = ','
	r.Comment = '#'
	r.TrimLeadingSpace = true
	return r.Read()
}

// parsePolicy reads and checks every rule of a policy file against model m. It returns the rules
// in file order; every problem is a *LoadError naming file and line.
func parsePolicy(file string, data []byte, m model.Model) ([]policyLine, error) {
	lines, err := splitLines(data)
	if err != nil {
		return nil, &LoadError{File: file, Reason: err.Error()}
	}
	var rules []policyLine
	for _, l := range lines {
		if isSkipped(l.text) {
			continue
		}
		fields, err := splitFields(l.text)
		if err != nil {
			return nil, &LoadError{File: file, Line: l.num, Reason: fmt.Sprintf("not a valid CSV line: %v", unwrapCSV(err))}
		}
		if reason := checkRule(fields, m); reason != "" {
			return nil, &LoadError{File: file, Line: l.num, Reason: reason}
		}
		l.fields = fields
		rules = append(rules, l)
	}
	return rules, nil
}

// unwrapCSV drops encoding/csv's "record on line 1" position, which is always line 1 here and
// would contradict the real line number.
func unwrapCSV(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkRule returns why fields (ptype first) is not an acceptable rule for model m, or "".
func checkRule(fields []string, m model.Model) string {
	ptype := fields[0]
	if reason := checkField("line type", ptype); reason != "" {
		return reason
	}
	sec := ptype[:1]
	if sec != "p" && sec != "g" {
		return fmt.Sprintf("line type %q is neither a permission (p) nor a role (g) line", ptype)
	}
	ast, ok := m[sec][ptype]
	if !ok {
		return fmt.Sprintf("line type %q is not defined in the model", ptype)
	}
	rule := fields[1:]
	if len(rule) != len(ast.Tokens) {
		return fmt.Sprintf("%q line has %d fields after the line type, the model defines %d (%s = %s)",
			ptype, len(rule), len(ast.Tokens), ptype, strings.TrimSpace(ast.Value))
	}
	for i, v := range rule {
		name := strings.TrimPrefix(strings.TrimSpace(ast.Tokens[i]), ptype+"_")
		if reason := checkField(describeField(sec, i, name), v); reason != "" {
			return reason
		}
		if sec != "p" {
			continue
		}
		switch name {
		case "eft":
			if v != effectAllow && v != effectDeny {
				return fmt.Sprintf("effect %q must be exactly %q or %q (lower case)", v, effectAllow, effectDeny)
			}
		case "act":
			if !knownActs[v] {
				return fmt.Sprintf("action %q is unknown (expected %q)", v, ActCall)
			}
		}
	}
	return ""
}

// checkField returns why a single field value is unacceptable, or "".
func checkField(what, v string) string {
	switch {
	case v == "":
		return fmt.Sprintf("%s is empty", what)
	case v != strings.TrimSpace(v):
		return fmt.Sprintf("%s %q has leading or trailing whitespace (Casbin would keep it, and the rule would not match what it says)", what, v)
	case strings.Contains(v, "#"):
		return fmt.Sprintf("%s %q contains \"#\": comments must be on a line of their own", what, v)
	case strings.Contains(v, "$"):
		return fmt.Sprintf("%s %q contains \"$\", which is not allowed in policy fields", what, v)
	}
	return ""
}

// describeField names the i-th rule field (0-based, after the line type) for an error message.
func describeField(sec string, i int, token string) string {
	if sec == "g" {
		switch i {
		case 0:
			return "principal (field 2)"
		case 1:
			return "role (field 3)"
		}
		return fmt.Sprintf("field %d", i+2)
	}
	names := map[string]string{"sub": "subject", "obj": "object", "act": "action", "eft": "effect"}
	if n, ok := names[token]; ok {
		return fmt.Sprintf("%s (field %d)", n, i+2)
	}
	return fmt.Sprintf("%s (field %d)", token, i+2)
}

// bytesAdapter is a read-only Casbin adapter over policy lines that Load already read and checked,
// so Casbin parses exactly the bytes that were validated and hashed (no second read of the file).
// It feeds each line through Casbin's own CSV loader (persist.LoadPolicyLine) and turns an error
// or a panic on a line into a *LoadError naming that line.
type bytesAdapter struct {
	file  string
	lines []policyLine
}

func (a *bytesAdapter) LoadPolicy(m model.Model) error {
	for _, l := range a.lines {
		if err := loadLine(l.text, m); err != nil {
			return &LoadError{File: a.file, Line: l.num, Reason: err.Error()}
		}
	}
	return nil
}

func loadLine(line string, m model.Model) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("casbin panicked loading this line: %v", r)
		}
	}()
	return persist.LoadPolicyLine(line, m)
}

var errReadOnly = errors.New("authz: policy is read-only; edit the policy file")

func (a *bytesAdapter) SavePolicy(model.Model) error                { return errReadOnly }
func (a *bytesAdapter) AddPolicy(string, string, []string) error    { return errReadOnly }
func (a *bytesAdapter) RemovePolicy(string, string, []string) error { return errReadOnly }
func (a *bytesAdapter) RemoveFilteredPolicy(string, string, int, ...string) error {
	return errReadOnly
}
