package overrides

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// A parameter path names a property of the arguments object, or of an
// object nested in it, by its property names joined with dots:
// "options.dry_run" is the dry_run property of the options argument. A
// top-level property whose own name has a dot is addressed by that name.

// splitPath turns a configured key into property names, against the
// upstream's schema: a top-level property named key wins over a split.
func splitPath(root map[string]any, key string) []string {
	if props, _ := root["properties"].(map[string]any); props != nil {
		if _, ok := props[key]; ok {
			return []string{key}
		}
	}
	return strings.Split(key, ".")
}

// site is where a path ends in a schema: the object schema whose properties
// hold the parameter, and the JSON pointer of the parameter's own schema.
type site struct {
	parent map[string]any
	name   string
	ptr    string
}

// combinators are the keywords that make an object schema's properties
// depend on more than its properties keyword: removing or narrowing a
// property below one of them could leave a branch that still requires or
// allows it, so the gateway refuses to rewrite through them.
var combinators = []string{"allOf", "anyOf", "oneOf", "not", "if", "then", "else",
	"dependentSchemas", "dependencies", "dependentRequired", "patternProperties",
	"unevaluatedProperties", "$dynamicRef", "$recursiveRef"}

// locate walks the property names of path from the root schema. With
// inline, a local $ref on the way (to #/$defs/<name> or
// #/definitions/<name>, alone in its schema) is replaced by a copy of the
// definition, so that rewriting below it changes this place only and not
// the definition's other uses; without inline the walk follows the $ref and
// leaves the tree as it is. Each object schema below the root must be a
// plain object schema: not an array, not a $ref elsewhere, no combinator.
func locate(root map[string]any, path []string, inline bool) (site, error) {
	node, ptr := root, ""
	for i, name := range path {
		where := strings.Join(path[:i], ".")
		if i > 0 {
			var err error
			if node, ptr, err = objectSchema(root, node, ptr, where, inline); err != nil {
				return site{}, err
			}
		}
		props, _ := node["properties"].(map[string]any)
		sub, ok := props[name]
		if !ok {
			of := "the upstream's input schema"
			if where != "" {
				of = fmt.Sprintf("the schema of %q", where)
			}
			return site{}, fmt.Errorf("%q is not a property of %s (its properties: %s)", name, of, list(sortedKeys(props)))
		}
		ptr += "/properties/" + escapePointer(name)
		if i == len(path)-1 {
			return site{parent: node, name: name, ptr: ptr}, nil
		}
		next, isObject := sub.(map[string]any)
		if !isObject {
			return site{}, fmt.Errorf("%q is not an object in the upstream's schema, so it has no properties to override", strings.Join(path[:i+1], "."))
		}
		if inline {
			if copied, to, err := inlineRef(root, next, strings.Join(path[:i+1], ".")); err != nil {
				return site{}, err
			} else if copied != nil {
				props[name], next, ptr = copied, copied, to
			}
		}
		node = next
	}
	panic("unreachable: an empty path")
}

// objectSchema checks that node, the schema of the parameter where, is an
// object schema the gateway can rewrite, following a local $ref.
func objectSchema(root, node map[string]any, ptr, where string, inline bool) (map[string]any, string, error) {
	if _, isRef := node["$ref"]; isRef && !inline {
		target, to, err := localRef(root, node, where)
		if err != nil {
			return nil, "", err
		}
		node, ptr = target, to
	}
	if typ, ok := node["type"]; ok && !allowsObject(typ) {
		if allowsArray(typ) {
			return nil, "", fmt.Errorf("%q is an array in the upstream's schema: a path cannot cross an array (the override would have to apply to every item)", where)
		}
		return nil, "", fmt.Errorf("%q is not an object in the upstream's schema (type %v), so it has no properties to override", where, typ)
	}
	for _, k := range []string{"items", "prefixItems"} {
		if _, ok := node[k]; ok {
			return nil, "", fmt.Errorf("%q is an array in the upstream's schema: a path cannot cross an array (the override would have to apply to every item)", where)
		}
	}
	for _, k := range combinators {
		if _, ok := node[k]; ok {
			return nil, "", fmt.Errorf("the schema of %q uses %s, which the gateway does not rewrite: a property below it could still be required or allowed by a branch the override cannot see", where, k)
		}
	}
	if _, ok := node["$ref"]; ok {
		return nil, "", fmt.Errorf("the schema of %q is a $ref beside other keywords, which the gateway does not rewrite", where)
	}
	if _, ok := node["properties"].(map[string]any); !ok {
		return nil, "", fmt.Errorf("the schema of %q declares no properties", where)
	}
	return node, ptr, nil
}

// inlineRef returns a copy of the definition node refers to when node is a
// lone local $ref, and nil when node has no $ref.
func inlineRef(root, node map[string]any, where string) (map[string]any, string, error) {
	if _, isRef := node["$ref"]; !isRef {
		return nil, "", nil
	}
	target, to, err := localRef(root, node, where)
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(target)
	if err != nil {
		return nil, "", err
	}
	copied, err := decodeObject(raw)
	if err != nil {
		return nil, "", err
	}
	return copied, to, nil
}

// localRef resolves node's $ref when it is alone in node and names a
// definition of the root schema: #/$defs/<name> or #/definitions/<name>.
// Anything else (a remote reference, a pointer elsewhere, an anchor) is
// refused: following it safely would need the whole resolution the
// validator does.
func localRef(root, node map[string]any, where string) (map[string]any, string, error) {
	ref, _ := node["$ref"].(string)
	if len(node) != 1 {
		return nil, "", fmt.Errorf("the schema of %q is a $ref beside other keywords, which the gateway does not rewrite", where)
	}
	for _, defs := range []string{"$defs", "definitions"} {
		name, ok := strings.CutPrefix(ref, "#/"+defs+"/")
		if !ok || strings.ContainsAny(name, "/%") {
			continue
		}
		name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
		table, _ := root[defs].(map[string]any)
		if target, ok := table[name].(map[string]any); ok {
			return target, "/" + defs + "/" + escapePointer(name), nil
		}
	}
	return nil, "", fmt.Errorf("the schema of %q is $ref %q, which the gateway does not follow (only #/$defs/<name> and #/definitions/<name> of the same schema)", where, ref)
}

func allowsObject(typ any) bool { return typeIncludes(typ, "object") }
func allowsArray(typ any) bool  { return typeIncludes(typ, "array") }

func typeIncludes(typ any, want string) bool {
	switch t := typ.(type) {
	case string:
		return t == want
	case []any:
		for _, v := range t {
			if v == want {
				return true
			}
		}
	}
	return false
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// fragment is ptr as a URI fragment for a $ref.
func fragment(ptr string) string { return "#" + (&url.URL{Fragment: ptr}).EscapedFragment() }

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// pruneDefinitions removes the definitions no $ref reaches any more: a
// definition that held a hidden parameter and was copied in place of its
// only $ref would otherwise still show the parameter to clients. It prunes
// only when every $ref of the schema names a whole definition
// (#/$defs/<name>, #/definitions/<name>): with any other reference it
// cannot tell what is reached, and keeps them all.
func pruneDefinitions(root map[string]any) {
	reached := map[string]bool{} // "$defs/<name>"
	var pending []any
	for k, v := range root {
		if k != "$defs" && k != "definitions" {
			pending = append(pending, v)
		}
	}
	for len(pending) > 0 {
		v := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		switch n := v.(type) {
		case []any:
			pending = append(pending, n...)
		case map[string]any:
			for k, sub := range n {
				if k != "$ref" {
					pending = append(pending, sub)
					continue
				}
				ref, _ := sub.(string)
				table, name, ok := wholeDefinition(ref)
				if !ok {
					return
				}
				if key := table + "/" + name; !reached[key] {
					reached[key] = true
					defs, _ := root[table].(map[string]any)
					if def, ok := defs[name]; ok {
						pending = append(pending, def)
					}
				}
			}
		}
	}
	for _, table := range []string{"$defs", "definitions"} {
		defs, ok := root[table].(map[string]any)
		if !ok {
			continue
		}
		for name := range defs {
			if !reached[table+"/"+name] {
				delete(defs, name)
			}
		}
		if len(defs) == 0 {
			delete(root, table)
		}
	}
}

// wholeDefinition splits a $ref to a whole definition into its table and
// name (unescaped).
func wholeDefinition(ref string) (table, name string, ok bool) {
	for _, table := range []string{"$defs", "definitions"} {
		if name, ok := strings.CutPrefix(ref, "#/"+table+"/"); ok && !strings.ContainsAny(name, "/%") {
			return table, strings.NewReplacer("~1", "/", "~0", "~").Replace(name), true
		}
	}
	return "", "", false
}
