package authz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Limits on one condition, so that evaluating it stays cheap whatever the arguments are.
const (
	maxCondLen   = 1024 // characters of condition text
	maxCondNodes = 256  // nodes of its syntax tree
)

// fnStrictGet is the accessor every field read in a condition is rewritten to. Its name cannot be
// written in a policy (a call to it is refused like any other function call).
const fnStrictGet = "__toolgate_get"

// disabledBuiltins are expr builtins a condition may not call: repeat allocates without bound,
// now makes a decision depend on the clock (Trace and Decide would disagree at a boundary),
// get reads a missing field as nil instead of failing (the fail-open trap conditions avoid), and
// the bit functions wrap around silently (bitshl(amount, 1) <= 100 would hold for a huge amount).
// sum is refused by the patcher (a predicate cannot be disabled in expr): its total wraps too.
var disabledBuiltins = []string{"repeat", "now", "get", "bitand", "bitor", "bitxor", "bitnand", "bitnot", "bitshl", "bitshr", "bitushr"}

// condition is one compiled condition of a policy line.
type condition struct {
	text     string
	prog     *vm.Program
	usesArgs bool     // reads the call's arguments (else it reads only principal.*)
	vis      *visNode // how to answer "could some arguments make it true (or false)?"
}

// condEnvShape is the compile-time environment: what a condition can name.
var condEnvShape = map[string]any{"args": map[string]any{}, "principal": map[string]any{}}

// condCompiles counts compilations: conditions, and the parts of one that read only the principal
// (see visible.go). Tests check that deciding never compiles.
var condCompiles atomic.Int64

// compileCond compiles a condition once, at load. It returns a message for the admin on error.
func compileCond(text string) (*condition, error) {
	if len(text) > maxCondLen {
		return nil, fmt.Errorf("condition is %d characters long, the limit is %d; split the rule or simplify it", len(text), maxCondLen)
	}
	prog, usesArgs, err := compileExpr(text, true)
	if err != nil {
		return nil, err
	}
	if notBool(prog.Node()) {
		return nil, errors.New("the condition is a value, not true or false; write a comparison such as amount <= 100")
	}
	if isFieldRead(prog.Node()) {
		// Also what a file cut mid-condition looks like ("amount > 100" cut to "am").
		return nil, fmt.Errorf("the condition only reads a value; compare it: write %s == true (or a comparison such as %s <= 100) instead", text, text)
	}
	c := &condition{text: text, prog: prog, usesArgs: usesArgs}
	c.vis = buildVis(c)
	return c, nil
}

// compileExpr compiles condition text (or a part of one, for [buildVis]) with the strict field
// reads, the strict operators and the refusals; asBool requires a boolean result.
func compileExpr(text string, asBool bool) (*vm.Program, bool, error) {
	condCompiles.Add(1)
	v := &strictPatcher{}
	opts := []expr.Option{
		expr.Env(condEnvShape),
		expr.MaxNodes(maxCondNodes),
		expr.Patch(v),
		expr.Function(fnStrictGet, strictGet),
	}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	opts = append(opts, strictOptions()...)
	for _, b := range disabledBuiltins {
		opts = append(opts, expr.DisableBuiltin(b))
	}
	prog, err := expr.Compile(text, opts...)
	if len(v.problems) > 0 {
		return nil, false, errors.New(v.problems[0])
	}
	if err != nil {
		msg := strings.SplitN(err.Error(), "\n", 2)[0]
		if strings.Contains(text, "#") {
			msg += " (comments must be on a line of their own)"
		}
		return nil, false, errors.New(msg)
	}
	return prog, v.usesArgs, nil
}

// isFieldRead reports whether a condition is a lone field read.
func isFieldRead(n ast.Node) bool {
	c, ok := n.(*ast.CallNode)
	if !ok {
		return false
	}
	id, ok := c.Callee.(*ast.IdentifierNode)
	return ok && id.Value == fnStrictGet
}

// notBool reports whether a condition's syntax tree can only give a non-boolean. Most such
// conditions are refused by expr's own type check; what it cannot see (arithmetic on arguments,
// whose type is known only per call) is caught here, and anything else fails closed per call.
func notBool(n ast.Node) bool {
	switch x := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.StringNode, *ast.ArrayNode, *ast.MapNode, *ast.NilNode:
		return true
	case *ast.BinaryNode:
		return x.Operator == ".."
	case *ast.CallNode:
		id, ok := x.Callee.(*ast.IdentifierNode)
		return ok && valueFns[id.Value]
	}
	return false
}

// strictPatcher rewrites every read of a name or a field into fnStrictGet, which fails when the
// field is missing. expr itself reads a missing map key as nil, and nil == nil is true: with
// plain expr, "region == principal.region" would hold when both are missing. It rewrites every
// comparison, membership test and arithmetic operator into its strict function (see strict.go),
// and refuses the constructs a policy condition does not need.
type strictPatcher struct {
	problems []string
	usesArgs bool
}

func (v *strictPatcher) refuse(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *strictPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		switch n.Value {
		case "args":
			v.usesArgs = true
			return
		case "principal":
			return
		}
		// A bare name is an argument: amount means args.amount.
		v.usesArgs = true
		ast.Patch(node, strictCall(&ast.IdentifierNode{Value: "args"}, &ast.StringNode{Value: n.Value}))
	case *ast.MemberNode:
		if n.Optional {
			v.refuse("?. is not supported in conditions (a missing field must fail, not read as nil); write 'field' in args && ... instead")
			return
		}
		if n.Method {
			v.refuse("method calls are not supported in conditions; use expr's builtin functions (len, lower, upper, ...)")
			return
		}
		ast.Patch(node, strictCall(n.Node, n.Property))
	case *ast.CallNode:
		name := "a function"
		if id, ok := n.Callee.(*ast.CallNode); ok && len(id.Arguments) == 2 {
			if s, ok := id.Arguments[1].(*ast.StringNode); ok {
				name = s.Value // the callee was already rewritten as a field read
			}
		}
		v.refuse("%s() is not available in conditions; use expr's builtin functions (len, lower, upper, abs, ...) except repeat, now, get, sum and the bit functions",
			name)
	case *ast.BinaryNode:
		if n.Operator == "??" {
			v.refuse("?? is not supported in conditions (a missing field must fail, not default); write ('field' in args ? field : default) instead")
			return
		}
		if fn, ok := boolOps[n.Operator]; ok {
			if isNil(n.Left) || isNil(n.Right) {
				v.refuse("comparing with nil is always an error in a condition (null is neither equal nor unequal to anything); to test for null write type(field) == 'nil' instead")
				return
			}
			if n.Operator == "contains" && isPrincipalRoles(n.Left) {
				v.refuse("contains compares strings, and principal.roles is a list; write '<role>' in principal.roles instead")
				return
			}
			if s, ok := n.Right.(*ast.StringNode); ok && n.Operator == "matches" {
				re, err := regexp.Compile(s.Value)
				if err != nil {
					v.refuse("the pattern %q after matches is not a valid regular expression (%v); write a valid one", s.Value, unwrapRegexErr(err))
					return
				}
				constPatterns.Store(s.Value, re)
			}
			ast.Patch(node, fnCall(fn, n.Left, n.Right))
			return
		}
		if fn, ok := arithOps[n.Operator]; ok {
			ast.Patch(node, fnCall(fn, n.Left, n.Right))
		}
	case *ast.UnaryNode:
		switch n.Operator {
		case "-":
			ast.Patch(node, fnCall(fnNeg, n.Node))
		case "+":
			ast.Patch(node, fnCall(fnPos, n.Node))
		}
	case *ast.BuiltinNode:
		if predicates[n.Name] && len(n.Arguments) > 0 {
			n.Arguments[0] = fnCall(fnList, n.Arguments[0], &ast.StringNode{Value: n.Name})
			return
		}
		switch n.Name {
		case "sum":
			v.refuse("sum() is not available in conditions (its total is not checked for overflow); write reduce(list, #acc + #, 0) instead")
		case "abs", "int":
			if len(n.Arguments) != 1 {
				v.refuse("%s() takes one argument; write %s(x)", n.Name, n.Name)
				return
			}
			fn := fnAbs
			if n.Name == "int" {
				fn = fnInt
			}
			ast.Patch(node, fnCall(fn, n.Arguments[0]))
		}
	case *ast.VariableDeclaratorNode:
		v.refuse("let is not supported in conditions; write the expression inline")
	case *ast.SequenceNode:
		v.refuse("; is not supported in conditions; write one expression")
	}
}

// isPrincipalRoles reports whether n is the (already rewritten) read of principal.roles.
func isPrincipalRoles(n ast.Node) bool {
	c, ok := n.(*ast.CallNode)
	if !ok || len(c.Arguments) != 2 {
		return false
	}
	id, ok1 := c.Callee.(*ast.IdentifierNode)
	obj, ok2 := c.Arguments[0].(*ast.IdentifierNode)
	key, ok3 := c.Arguments[1].(*ast.StringNode)
	return ok1 && ok2 && ok3 && id.Value == fnStrictGet && obj.Value == "principal" && key.Value == "roles"
}

func isNil(n ast.Node) bool {
	_, ok := n.(*ast.NilNode)
	return ok
}

func fnCall(name string, args ...ast.Node) ast.Node {
	return &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: args}
}

func strictCall(obj, key ast.Node) ast.Node {
	return &ast.CallNode{Callee: &ast.IdentifierNode{Value: fnStrictGet}, Arguments: []ast.Node{obj, key}}
}

// strictGet reads obj[key] and fails when it is not there.
func strictGet(params ...any) (any, error) {
	if len(params) != 2 {
		return nil, fmt.Errorf("internal: field read with %d operands", len(params))
	}
	obj, key := params[0], params[1]
	switch o := obj.(type) {
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			return nil, fmt.Errorf("field name %v is not a string", key)
		}
		v, ok := o[k]
		if !ok {
			return nil, fmt.Errorf("missing field %q", k)
		}
		return v, nil
	case []any:
		i, ok := index(key, len(o))
		if !ok {
			return nil, fmt.Errorf("index %v out of range (length %d)", key, len(o))
		}
		return o[i], nil
	case nil:
		return nil, fmt.Errorf("cannot read %v of null", key)
	default:
		return nil, fmt.Errorf("cannot read %v of a %T", key, obj)
	}
}

func index(key any, n int) (int, bool) {
	var i int
	switch k := key.(type) {
	case int:
		i = k
	case int64:
		if k < -int64(n) || k >= int64(n) {
			return 0, false
		}
		i = int(k)
	default:
		return 0, false
	}
	if i < 0 {
		i += n
	}
	return i, i >= 0 && i < n
}

// eval runs the condition on an environment built by [callCtx.env].
func (c *condition) eval(env map[string]any) (bool, error) {
	out, err := expr.Run(c.prog, env)
	if err != nil {
		return false, errors.New(strings.SplitN(err.Error(), "\n", 2)[0])
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("condition gave %T, not true or false", out)
	}
	return b, nil
}

// decodeArgs turns the call's argument bytes into what conditions see: a JSON object decoded with
// UseNumber, then every number converted once. The precision rule: a number written without a
// fraction or exponent that fits int64 becomes int64 (exact, so IDs above 2^53 compare exactly);
// every other number becomes float64 (IEEE 754 double, about 15-17 significant digits, so
// 100.000000000000001 reads as 100). When a condition compares an int64 with a float64, they
// compare as float64 (so 9007199254740993 equals 9007199254740992.0; see strict.go). A number outside
// float64's range is an error. Empty or null
// arguments are an empty object; anything but an object is an error.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("arguments have data after the JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments are a JSON %s, not an object", jsonKind(v))
	}
	out, err := convertNumbers(obj)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "value"
}

func convertNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return convertNumber(string(x))
	case map[string]any:
		for k, e := range x {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case []any:
		for i, e := range x {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	}
	return v, nil
}

func convertNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s is outside the range of a float64", s)
	}
	return f, nil
}
