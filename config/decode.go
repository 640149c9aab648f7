package config

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// loader walks the YAML AST rather than decoding into structs, because a struct decoder stops at the first
// error and forgets line numbers; here every value is checked where it stands and every problem is kept.
type loader struct {
	file    string // as given, for messages
	env     func(string) (string, bool)
	anchors []*ast.AnchorNode // in document order, for aliases
	aliases int               // alias expansions so far, bounded against cycles and "billion laughs"
	// tooManyAliases is how many problems there were when the alias bound was hit; what follows is noise
	// from a half-expanded file, so it is dropped.
	tooManyAliases int
	probs          []Problem
	lines          map[string]int  // key path -> line of the key, so semantic checks can point at it
	bad            map[string]bool // key paths whose value failed to decode, so checks don't pile on
}

// maxAliases bounds alias expansion; real config files use a handful.
const maxAliases = 1000

// field decodes the value of one known key; fields is the set of keys allowed in one mapping.
type field func(n ast.Node, path string)
type fields map[string]field

// entry is one key of a mapping, after merge keys have been applied.
type entry struct {
	key  string
	path string
	line int
	val  ast.Node
}

func (l *loader) report(line int, path, format string, args ...any) {
	l.probs = append(l.probs, Problem{File: l.file, Line: line, Key: path, Msg: fmt.Sprintf(format, args...)})
}

// fail reports a value that could not be decoded and marks its path bad.
func (l *loader) fail(n ast.Node, path, format string, args ...any) {
	l.bad[path] = true
	l.report(cmp.Or(line(n), l.lines[path]), path, format, args...)
}

// reportAt reports a semantic problem at the line where path was written.
func (l *loader) reportAt(path, format string, args ...any) {
	l.report(l.lines[path], path, format, args...)
}

func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// plainKey is a key that reads unambiguously after a dot in a key path.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// child is the key path of key inside path: a.b, or a["odd key"] when the key would be ambiguous.
func child(path, key string) string {
	switch {
	case !plainKey.MatchString(key):
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// collectAnchors records every anchor in document order so aliases can find the one they refer to.
func (l *loader) collectAnchors(root ast.Node) {
	ast.Walk(visitor(func(n ast.Node) {
		if a, ok := n.(*ast.AnchorNode); ok {
			l.anchors = append(l.anchors, a)
		}
	}), root)
}

type visitor func(ast.Node)

func (v visitor) Visit(n ast.Node) ast.Visitor {
	if n != nil {
		v(n)
	}
	return v
}

// resolve follows anchors, aliases and tags to the node that carries the value. It returns nil, after
// reporting, when that fails; nil is otherwise treated like null.
func (l *loader) resolve(n ast.Node, path string) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			n = l.alias(v, path)
		case *ast.TagNode:
			n = l.tag(v, path)
		default:
			return n
		}
	}
}

// alias finds the latest anchor of that name defined before the alias, as YAML specifies.
func (l *loader) alias(a *ast.AliasNode, path string) ast.Node {
	if l.aliases++; l.aliases > maxAliases {
		if l.aliases == maxAliases+1 { // once: the expansions that follow would each say the same
			l.bad[path] = true
			l.reportAt(path, "more than %d alias expansions (aliases that refer to themselves, or nest too deep)", maxAliases)
			l.tooManyAliases = len(l.probs)
		}
		return nil
	}
	name := a.Value.GetToken().Value
	at := a.GetToken().Position.Offset
	for _, an := range slices.Backward(l.anchors) {
		if an.Name.GetToken().Value == name && an.GetToken().Position.Offset < at {
			return an.Value
		}
	}
	l.fail(a, path, "alias *%s refers to no anchor &%s defined before it", name, name)
	return nil
}

// tag honours !!str (so `!!str 8080` is a string) and the other standard tags; custom tags would need a
// meaning toolgate does not define, so they are problems.
func (l *loader) tag(t *ast.TagNode, path string) ast.Node {
	switch name := t.Start.Value; name {
	case "!!str":
		v := l.resolve(t.Value, path)
		if _, isScalar := v.(ast.ScalarNode); isScalar && v.Type() != ast.StringType {
			return ast.String(v.GetToken())
		}
		return v
	case "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
		return t.Value
	default:
		l.fail(t, path, "unsupported YAML tag %s", name)
		return nil
	}
}

func isNull(n ast.Node) bool {
	_, null := n.(*ast.NullNode)
	return n == nil || null
}

// entries lists a mapping's keys with merge keys (<<) applied. Explicit keys win over merged ones; a key
// written twice is a problem rather than a silent last-wins. Null is an empty mapping.
func (l *loader) entries(n ast.Node, path, want string) []entry {
	n = l.resolve(n, path)
	if isNull(n) {
		return nil
	}
	m, ok := n.(*ast.MappingNode)
	if !ok {
		l.fail(n, path, "expected %s, got %s", want, describe(n))
		return nil
	}
	var own, merged []entry
	first := map[string]int{}
	for _, kv := range m.Values {
		if _, isMerge := kv.Key.(*ast.MergeKeyNode); isMerge {
			merged = append(merged, l.merged(kv.Value, path, want)...)
			continue
		}
		e, ok := l.entry(kv, path)
		if !ok {
			continue
		}
		if ln, dup := first[e.key]; dup {
			l.report(e.line, e.path, "duplicate key (first written on line %d)", ln)
			continue
		}
		first[e.key] = e.line
		own = append(own, e)
	}
	for _, e := range merged {
		if _, dup := first[e.key]; !dup {
			first[e.key] = e.line
			own = append(own, e)
		}
	}
	for _, e := range own {
		l.lines[e.path] = e.line
	}
	return own
}

// merged expands the value of a merge key: one mapping, or a list of them where earlier ones win.
func (l *loader) merged(n ast.Node, path, want string) []entry {
	seq, ok := l.resolve(n, path).(*ast.SequenceNode)
	if !ok {
		return l.entries(n, path, want)
	}
	var out []entry
	for _, item := range seq.Values {
		out = append(out, l.entries(item, path, want)...)
	}
	return out
}

func (l *loader) entry(kv *ast.MappingValueNode, path string) (entry, bool) {
	var key string
	switch k := kv.Key.(type) {
	case *ast.StringNode:
		key = k.Value
	case ast.ScalarNode:
		key = k.GetToken().Value
	default:
		l.fail(kv.Key, path, "expected a plain key, got %s", describe(kv.Key))
		return entry{}, false
	}
	return entry{key: key, path: child(path, key), line: line(kv.Key), val: kv.Value}, true
}

// object decodes a mapping with a fixed set of keys. Null values are skipped, so `key:` with nothing
// after it means the same as leaving the key out.
func (l *loader) object(n ast.Node, path string, fs fields) {
	for _, e := range l.entries(n, path, "a mapping with keys "+keyList(fs)) {
		f, known := fs[e.key]
		if !known {
			if moved, ok := movedKeys[e.path]; ok {
				l.report(e.line, e.path, "unknown key: %s", moved)
				continue
			}
			l.report(e.line, e.path, "unknown key; allowed keys here: %s%s", keyList(fs), suggest(e.key, fs))
			continue
		}
		if v := l.resolve(e.val, e.path); !isNull(v) {
			f(v, e.path)
		}
	}
}

func keyList(fs fields) string {
	keys := make([]string, 0, len(fs))
	for k := range fs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// suggest names the allowed key closest to a misspelt one, when there is a plausible one.
func suggest(key string, fs fields) string {
	best, bestDist := "", 3 // more than two edits away is a different word, not a typo
	for k := range fs {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist || d == bestDist && k < best {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance, for suggest.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
