package authz

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
)

// The actions the gateway asks about. Each kind of object has its own, so that allowing a tool
// call never allows reading a resource of the same server by accident (and default deny holds for
// every kind):
//   - call: a tools/call of "<server>/<tool>";
//   - read: listing, reading, subscribing to or completing "<server>/<resource URI>" (templates:
//     "<server>/<URI template>" for listing; a read is checked against the concrete URI);
//   - get: listing, getting or completing the arguments of the prompt "<server>/<prompt>";
//   - approve: deciding (approving or denying) in the console a held call of the tool
//     "<server>/<tool>", asked with the approver's name as the principal and the held call's
//     arguments (console/). The gateway never asks it about a call, so it grants no call.
//   - pin: approving in the console a new definition of the tool "<server>/<tool>" that pinning
//     blocks (tool_changed), asked with the approver's name. It grants no call either.
const (
	ActCall    = "call"
	ActRead    = "read"
	ActGet     = "get"
	ActApprove = "approve"
	ActPin     = "pin"
)

// knownActs are the actions a policy line may name. A deny line whose action is misspelled would
// silently never apply, so an unknown action is a load error rather than a dead rule.
var knownActs = map[string]bool{ActCall: true, ActRead: true, ActGet: true, ActApprove: true, ActPin: true}

// Effects a policy line may carry. Casbin compares them case-sensitively: "Allow" would silently
// mean "not allow", and "Deny" would silently not deny.
const (
	effectAllow = "allow"
	effectDeny  = "deny"
)

// LoadError is one problem found while loading a model or policy file. Line is 1-based, or 0
// when the problem is not tied to one line. Reason says what is wrong and, where there is one,
// what to write instead ("...; write allow instead").
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

// LoadErrors is every problem found in one load, sorted by file and line. Error prints one
// problem per line ("file:line: reason"), so a CLI can print it as is. errors.As(err, &le) with
// le a *LoadError finds the first problem.
type LoadErrors struct {
	Problems []*LoadError
}

func (e *LoadErrors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As and errors.Is.
func (e *LoadErrors) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// problems collects LoadErrors while a load goes on.
type problems struct {
	list []*LoadError
}

func (ps *problems) add(file string, line int, format string, args ...any) {
	ps.list = append(ps.list, &LoadError{File: file, Line: line, Reason: fmt.Sprintf(format, args...)})
}

// err returns nil, or a *LoadErrors with the problems sorted by file order then line.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	out := append([]*LoadError(nil), ps.list...)
	rank := map[string]int{} // files in the order they were first reported (model before policy)
	for _, p := range out {
		if _, ok := rank[p.File]; !ok {
			rank[p.File] = len(rank)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank[out[i].File], rank[out[j].File]; ri != rj {
			return ri < rj
		}
		return out[i].Line < out[j].Line
	})
	return &LoadErrors{Problems: out}
}

// policyLine is one line of a policy file, as Casbin's CSV loader will read it.
type policyLine struct {
	num    int      // 1-based line number in the file
	text   string   // the line, trimmed, exactly as written (minus surrounding whitespace)
	fields []string // ptype first ("p", "g", ...), then the rule; padded to the model's size
}

// splitLines yields the lines of a policy file the way Casbin's file adapter does (bufio.Scanner,
// CR LF tolerated, each line trimmed), with 1-based numbers. A leading UTF-8 BOM is dropped.
func splitLines(data []byte) ([]policyLine, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var out []policyLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
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

// splitFields parses one rule line with the same CSV settings as persist.LoadPolicyLine:
// RFC 4180 quoting ("a, b" is one field, "" inside quotes is one "), spaces after a comma are
// dropped, nothing else is trimmed.
func splitFields(line string) ([]string, error) {
	r := csv.NewReader(strings.NewReader(line))
	r.Comma = ','
	r.Comment = '#'
	r.TrimLeadingSpace = true
	return r.Read()
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

// csvHint says how to fix a line encoding/csv refused.
func csvHint(err error) string {
	switch {
	case errors.Is(err, csv.ErrBareQuote):
		return `write strings in a condition with single quotes (status == 'shipped'), or wrap the whole condition in double quotes and double every " inside it`
	case errors.Is(err, csv.ErrQuote):
		return `a field that starts with " must end with " right before the next comma or the end of the line; write "amount in [10, 20]" instead`
	}
	return "write the line as comma-separated fields"
}

// checkField returns why a single field value is unacceptable, or "". what names the field for
// the message ("subject (field 2)").
func checkField(what, v string) string {
	switch {
	case v == "":
		return fmt.Sprintf("%s is empty; write a value or delete the extra comma", what)
	case v != strings.TrimSpace(v):
		return fmt.Sprintf("%s %q has leading or trailing whitespace (Casbin would keep it, and the rule would not match what it says); write %q instead",
			what, v, strings.TrimSpace(v))
	case strings.Contains(v, "$"):
		return fmt.Sprintf("%s %q contains \"$\", which is not allowed in policy fields; write %q instead",
			what, v, strings.ReplaceAll(v, "$", ""))
	}
	return ""
}

// checkCommentChar returns why v (not a condition) must not contain "#", or "".
func checkCommentChar(what, v string) string {
	if i := strings.Index(v, "#"); i >= 0 {
		return fmt.Sprintf("%s %q contains \"#\": comments must be on a line of their own; write %q instead and put the comment on the line above",
			what, v, strings.TrimSpace(v[:i]))
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
	names := map[string]string{"sub": "subject", "obj": "object", "act": "action", "eft": "effect", "cond": "condition"}
	if n, ok := names[token]; ok {
		return fmt.Sprintf("%s (field %d)", n, i+2)
	}
	return fmt.Sprintf("%s (field %d)", token, i+2)
}

// bytesAdapter is a read-only Casbin adapter over policy lines that were already read, linted and
// padded, so Casbin holds exactly the rules that were validated and hashed (no second read of the
// file). Each rule goes through Casbin's own persist.LoadPolicyArray; an error or a panic on a
// line becomes a *LoadError naming that line.
//
// Casbin's own file adapter cannot be used with the toolgate model: persist.LoadPolicyLine
// refuses a line with fewer fields than the policy definition ("invalid policy rule size"), and
// the condition field is optional. The adapter pads a missing condition with "".
type bytesAdapter struct {
	file  string
	lines []policyLine
}

func (a *bytesAdapter) LoadPolicy(m model.Model) error {
	for _, l := range a.lines {
		if err := loadLine(l, m); err != nil {
			return &LoadError{File: a.file, Line: l.num, Reason: err.Error()}
		}
	}
	return nil
}

func loadLine(l policyLine, m model.Model) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("casbin panicked loading this line: %v", r)
		}
	}()
	if l.fields == nil {
		// Not pre-parsed (tests feed raw text): Casbin's line loader, as its file adapter does.
		return persist.LoadPolicyLine(l.text, m)
	}
	return persist.LoadPolicyArray(l.fields, m)
}

var errReadOnly = errors.New("authz: policy is read-only; edit the policy file")

func (a *bytesAdapter) SavePolicy(model.Model) error                { return errReadOnly }
func (a *bytesAdapter) AddPolicy(string, string, []string) error    { return errReadOnly }
func (a *bytesAdapter) RemovePolicy(string, string, []string) error { return errReadOnly }
func (a *bytesAdapter) RemoveFilteredPolicy(string, string, int, ...string) error {
	return errReadOnly
}
