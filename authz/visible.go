package authz

import (
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Visibility (tools/list) asks of a condition: could SOME arguments make it true (an allow line
// that may apply), and could some arguments make it false (a deny line that may not apply)?
// Nothing about the call is known, but the subject is. A condition is split into its boolean
// skeleton (&&, ||, !, not, ?:) and leaves; each leaf gets the set of outcomes it can have:
//
//   - a leaf that reads no argument is evaluated on the subject: exactly true, false or error;
//   - a leaf that reads arguments can be anything (true, false or error), except when it reads
//     a principal attribute the subject does not have, unconditionally (not under ?:, && or ||
//     inside the leaf, or in a predicate's closure): then every evaluation of it fails.
//
// The skeleton combines the sets with the short-circuit rules expr evaluates by. The answer
// over-approximates what the arguments can do (amount > 10 && amount < 5 still counts as
// "maybe true"), so Visible never hides a tool that some call would be allowed, and it no longer
// lists one that every call is denied for a reason the subject alone decides
// (region == principal.region for a principal without a region attribute).

// outcome is a set of possible results of a condition or a part of one.
type outcome uint8

const (
	oTrue outcome = 1 << iota
	oFalse
	oErr
	oAny = oTrue | oFalse | oErr
)

// visNode is one node of a condition's boolean skeleton.
type visNode struct {
	op   byte // '&' (&&), '|' (||), '!' (not), '?' (cond ? a : b), 'l' (a leaf)
	kids []*visNode
	// A leaf: prog when it reads no argument (evaluated on the subject); otherwise reads, the
	// principal attributes it reads whenever it is evaluated.
	prog  *vm.Program
	reads []string
}

// buildVis builds the skeleton of a compiled condition. A condition that reads no argument is
// one leaf, its own program. A leaf that fails to compile on its own counts as "anything".
func buildVis(c *condition) *visNode {
	if !c.usesArgs {
		return &visNode{op: 'l', prog: c.prog}
	}
	tree, err := parser.Parse(c.text)
	if err != nil {
		return &visNode{op: 'l'}
	}
	return skeleton(tree.Node)
}

func skeleton(n ast.Node) *visNode {
	switch x := n.(type) {
	case *ast.BinaryNode:
		switch x.Operator {
		case "&&", "and":
			return &visNode{op: '&', kids: []*visNode{skeleton(x.Left), skeleton(x.Right)}}
		case "||", "or":
			return &visNode{op: '|', kids: []*visNode{skeleton(x.Left), skeleton(x.Right)}}
		}
	case *ast.UnaryNode:
		if x.Operator == "!" || x.Operator == "not" {
			return &visNode{op: '!', kids: []*visNode{skeleton(x.Node)}}
		}
	case *ast.ConditionalNode:
		return &visNode{op: '?', kids: []*visNode{skeleton(x.Cond), skeleton(x.Exp1), skeleton(x.Exp2)}}
	}
	leaf := &visNode{op: 'l'}
	if !readsArgs(n) {
		if prog, _, err := compileExpr(n.String(), false); err == nil {
			leaf.prog = prog
		}
		return leaf
	}
	principalReads(n, &leaf.reads)
	return leaf
}

// readsArgs reports whether a part of a condition names anything but principal.
func readsArgs(n ast.Node) bool {
	f := &argFinder{}
	ast.Walk(&n, f)
	return f.found
}

type argFinder struct{ found bool }

func (f *argFinder) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok && id.Value != "principal" {
		f.found = true
	}
}

// principalReads collects the principal attributes (principal.x, principal['x']) that n reads
// whenever it is evaluated to the end: not those under the branches of ?:, the right side of
// && or || (or ??), or in a closure.
func principalReads(n ast.Node, out *[]string) {
	switch x := n.(type) {
	case *ast.MemberNode:
		if id, ok := x.Node.(*ast.IdentifierNode); ok && id.Value == "principal" && !x.Optional {
			if s, ok := x.Property.(*ast.StringNode); ok {
				*out = append(*out, s.Value)
				return
			}
		}
		principalReads(x.Node, out)
		principalReads(x.Property, out)
	case *ast.BinaryNode:
		principalReads(x.Left, out)
		switch x.Operator {
		case "&&", "and", "||", "or", "??":
		default:
			principalReads(x.Right, out)
		}
	case *ast.UnaryNode:
		principalReads(x.Node, out)
	case *ast.ConditionalNode:
		principalReads(x.Cond, out)
	case *ast.BuiltinNode:
		for _, a := range x.Arguments {
			principalReads(a, out)
		}
	case *ast.ArrayNode:
		for _, e := range x.Nodes {
			principalReads(e, out)
		}
	case *ast.MapNode:
		for _, p := range x.Pairs {
			principalReads(p, out)
		}
	case *ast.PairNode:
		principalReads(x.Key, out)
		principalReads(x.Value, out)
	case *ast.SliceNode:
		principalReads(x.Node, out)
		if x.From != nil {
			principalReads(x.From, out)
		}
		if x.To != nil {
			principalReads(x.To, out)
		}
	}
	// Closures, literals, identifiers, pointers: nothing read unconditionally.
}

// eval gives the outcomes the skeleton can have for this subject. env is the condition
// environment (the arguments empty), principal its principal map.
func (v *visNode) eval(env, principal map[string]any) outcome {
	switch v.op {
	case '!':
		o := v.kids[0].eval(env, principal)
		r := o & oErr
		if o&oTrue != 0 {
			r |= oFalse
		}
		if o&oFalse != 0 {
			r |= oTrue
		}
		return r
	case '&', '|':
		o := v.kids[0].eval(env, principal)
		r := o & oErr
		goOn, stop := oTrue, oFalse // &&: true evaluates the right side, false stops
		if v.op == '|' {
			goOn, stop = oFalse, oTrue
		}
		r |= o & stop
		if o&goOn != 0 {
			r |= v.kids[1].eval(env, principal)
		}
		return r
	case '?':
		o := v.kids[0].eval(env, principal)
		r := o & oErr
		if o&oTrue != 0 {
			r |= v.kids[1].eval(env, principal)
		}
		if o&oFalse != 0 {
			r |= v.kids[2].eval(env, principal)
		}
		return r
	}
	if v.prog == nil {
		for _, name := range v.reads {
			if _, ok := principal[name]; !ok {
				return oErr
			}
		}
		return oAny
	}
	out, err := expr.Run(v.prog, env)
	if err != nil {
		return oErr
	}
	switch out {
	case true:
		return oTrue
	case false:
		return oFalse
	}
	return oErr
}
