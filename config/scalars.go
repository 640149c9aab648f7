package config

import (
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// The decoders below turn one YAML value into one Go value, reporting a problem (and returning the zero
// value) when the value has the wrong shape. Ranges and cross-field rules are checked later, in validate.go.

// set adapts a value decoder to a field that stores into dst, keeping the field tables one line per key.
func set[T any](dst *T, decode func(ast.Node, string) T) field {
	return func(n ast.Node, path string) { *dst = decode(n, path) }
}

// str decodes a string and expands ${VAR} references in it. Other scalars are not converted: YAML reads
// `8080` and `yes` as a number and a boolean, so the message says to quote them.
func (l *loader) str(n ast.Node, path string) string {
	raw, ok := l.text(n, path, "a string")
	if !ok {
		return ""
	}
	return l.expand(raw, n, path)
}

func (l *loader) text(n ast.Node, path, want string) (string, bool) {
	if n == nil && l.bad[path] {
		return "", false // resolve has already said why
	}
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case ast.ScalarNode:
		if !isNull(n) {
			tok := v.GetToken().Value
			l.fail(n, path, "expected %s, got %s (quote it: %q)", want, describe(n), tok)
			return "", false
		}
	}
	l.fail(n, path, "expected %s, got %s", want, describe(n))
	return "", false
}

func (l *loader) expand(raw string, n ast.Node, path string) string {
	out, unset, err := expand(raw, l.env)
	if err != nil {
		l.fail(n, path, "%v", err)
		return ""
	}
	for _, name := range unset {
		l.fail(n, path, "environment variable %s is not set (set it, or write ${%s:-default})", name, name)
	}
	return out
}

func (l *loader) strList(n ast.Node, path string) []string {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		l.fail(n, path, "expected a list of strings, got %s", describe(n))
		return nil
	}
	out := make([]string, 0, len(seq.Values))
	for i, item := range seq.Values {
		p := index(path, i)
		l.lines[p] = line(item)
		out = append(out, l.str(l.resolve(item, p), p))
	}
	return out
}

// strMap decodes a mapping of names to strings; checkKey reports names the caller cannot accept.
func (l *loader) strMap(n ast.Node, path string, checkKey func(e entry)) map[string]string {
	es := l.entries(n, path, "a mapping of names to strings")
	out := make(map[string]string, len(es))
	for _, e := range es {
		checkKey(e)
		out[e.key] = l.str(l.resolve(e.val, e.path), e.path)
	}
	return out
}

func (l *loader) boolean(n ast.Node, path string) bool {
	b, ok := n.(*ast.BoolNode)
	if !ok {
		l.fail(n, path, "expected true or false, got %s", describe(n))
		return false
	}
	return b.Value
}

// duration accepts only strings with a unit: a bare 8 could mean seconds or milliseconds.
func (l *loader) duration(n ast.Node, path string) Duration {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		num := n.GetToken().Value
		l.fail(n, path, "expected a duration such as \"8s\", got the number %s (write \"%ss\" or another unit)", num, num)
		return 0
	}
	s, ok := l.text(n, path, `a duration such as "8s"`)
	if !ok {
		return 0
	}
	s = l.expand(s, n, path)
	d, err := time.ParseDuration(s)
	if err != nil && !l.bad[path] { // echoing s is safe: a duration is no secret

		l.fail(n, path, "expected a duration such as \"8s\", got %q", s)
	}
	return Duration(d)
}

// bytes accepts an integer number of bytes.
func (l *loader) bytes(n ast.Node, path string) int64 {
	return l.integer(n, path, "an integer number of bytes", "1048576")
}

// count accepts a whole number of things (attempts, calls, probes). Ranges are checked in validate.go.
func (l *loader) count(n ast.Node, path string) int {
	return int(l.integer(n, path, "a whole number", "5"))
}

// integer accepts an integer that fits in int64; what and example word the message.
func (l *loader) integer(n ast.Node, path, what, example string) int64 {
	in, ok := n.(*ast.IntegerNode)
	switch {
	case !ok && isHugeInt(n):
		l.fail(n, path, "expected %s, got %s, which is too large", what, n.GetToken().Value)
		return 0
	case !ok:
		l.fail(n, path, "expected %s such as %s, got %s", what, example, describe(n))
		return 0
	}
	switch v := in.Value.(type) {
	case int64:
		return v
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v)
		}
	}
	l.fail(n, path, "expected %s, got %s, which is too large", what, in.GetToken().Value)
	return 0
}

// number accepts an integer or a decimal (0.2, 1, 1e3); .inf and .nan are not numbers anyone means here.
func (l *loader) number(n ast.Node, path string) float64 {
	switch v := n.(type) {
	case *ast.FloatNode:
		return v.Value
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return float64(i)
		case uint64:
			return float64(i)
		}
	}
	l.fail(n, path, "expected a number such as 0.5, got %s", describe(n))
	return 0
}

var digits = regexp.MustCompile(`^-?[0-9]+$`)

// isHugeInt spots an unquoted integer too big for uint64, which the YAML parser turns into a string.
func isHugeInt(n ast.Node) bool {
	s, ok := n.(*ast.StringNode)
	return ok && s.GetToken().Type == token.StringType && digits.MatchString(s.Value)
}

// describe names what was found, for "expected X, got Y" messages. It quotes values as written in the
// file, never after expansion, so a secret from the environment is not echoed into logs.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.StringNode:
		return fmt.Sprintf("the string %q", v.Value)
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "the number " + n.GetToken().Value
	case *ast.BoolNode:
		return "the boolean " + n.GetToken().Value
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode:
		return "a mapping"
	}
	return n.Type().YAMLName()
}
