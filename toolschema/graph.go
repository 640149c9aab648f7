package toolschema

import "strconv"

// A schema is a graph of subschemas. Two kinds of step matter for the cost
// of validation:
//
//   - in-place: the subschema is applied to the same instance value
//     ($ref and friends, allOf/anyOf/oneOf, not, if/then/else,
//     dependentSchemas/dependencies);
//   - descending: the subschema is applied to a child of the value
//     (properties, items, ...), so each such step consumes one level of
//     the instance.
//
// A loop of in-place steps never ends (findRefCycle); in-place steps that
// fan out through shared $refs multiply (checkFanOut).
var (
	inPlaceLists   = []string{"allOf", "anyOf", "oneOf"}
	inPlaceSingles = []string{"not", "if", "then", "else"}
	inPlaceMaps    = []string{"dependentSchemas", "dependencies"}
)

// edge is one step to a subschema, named by its canonical JSON pointer.
type edge struct {
	ptr string
	v   any
}

// inPlaceEdges lists the subschemas applied to the same instance value as
// the schema at ptr. Before 2019-09, keywords next to $ref are ignored, so
// $ref is then the only way out.
func inPlaceEdges(s *scan, ptr string, v any) []edge {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil // boolean schemas go nowhere
	}
	out := refEdges(s, obj)
	if _, hasRef := obj["$ref"]; hasRef && s.dialect < 2019 {
		return out
	}
	for _, kw := range inPlaceLists {
		list, _ := obj[kw].([]any)
		for i, sub := range list {
			out = append(out, edge{ptr + "/" + kw + "/" + strconv.Itoa(i), sub})
		}
	}
	for _, kw := range inPlaceSingles {
		if sub, ok := obj[kw]; ok {
			out = append(out, edge{ptr + "/" + kw, sub})
		}
	}
	for _, kw := range inPlaceMaps {
		m, _ := obj[kw].(map[string]any)
		for _, k := range sortedKeys(m) {
			out = append(out, edge{ptr + "/" + kw + "/" + escapeToken(k), m[k]})
		}
	}
	return out
}

func refEdges(s *scan, obj map[string]any) []edge {
	var out []edge
	for _, kw := range refKeywords {
		ref, ok := obj[kw].(string)
		if !ok {
			continue
		}
		if t, ok := s.resolve(ref); ok {
			out = append(out, edge{t.ptr, t.v})
		}
	}
	return out
}

// children says which subschemas apply to which child of a value. A child
// is one thing at a time: a named key, another key, a tuple position,
// another item, or a key string checked by propertyNames. So the cost of a
// child is that of one situation, never the sum of all of them; this is
// what keeps a "value: anyOf [array of value, object of value]" schema
// from looking exponential.
type children struct {
	named   map[string][]edge // "k"+name or "i"+index -> subschemas for that child
	anyKey  []edge            // keys not listed in properties
	anyItem []edge            // positions past the tuple
	keys    []edge            // propertyNames, applied to every key
}

// childrenOf lists the descending steps of the schema at ptr. It errs on
// the side of more: patternProperties count for every key and contains for
// every item, since we do not evaluate patterns here.
func childrenOf(s *scan, ptr string, v any) children {
	obj, ok := v.(map[string]any)
	if !ok {
		return children{}
	}
	if _, hasRef := obj["$ref"]; hasRef && s.dialect < 2019 {
		return children{}
	}
	patterns := collectEdges(obj, ptr, "patternProperties")
	contains := collectEdges(obj, ptr, "contains")
	ch := children{
		named:   map[string][]edge{},
		anyKey:  append(collectEdges(obj, ptr, "additionalProperties", "unevaluatedProperties"), patterns...),
		anyItem: append(collectEdges(obj, ptr, "items", "additionalItems", "unevaluatedItems"), contains...),
		keys:    collectEdges(obj, ptr, "propertyNames"),
	}
	props, _ := obj["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		e := edge{ptr + "/properties/" + escapeToken(name), props[name]}
		ch.named["k"+name] = append([]edge{e}, patterns...)
	}
	for _, kw := range []string{"prefixItems", "items"} {
		tuple, _ := obj[kw].([]any)
		for i, sub := range tuple {
			e := edge{ptr + "/" + kw + "/" + strconv.Itoa(i), sub}
			ch.named["i"+strconv.Itoa(i)] = append([]edge{e}, contains...)
		}
	}
	return ch
}

// collectEdges gathers the keywords' subschemas: a schema value, or every
// value of patternProperties. Tuple-form "items" arrays are handled by
// childrenOf.
func collectEdges(obj map[string]any, ptr string, keywords ...string) []edge {
	var out []edge
	for _, kw := range keywords {
		switch sub := obj[kw].(type) {
		case bool:
			out = append(out, edge{ptr + "/" + kw, sub})
		case map[string]any:
			if kw == "patternProperties" {
				for _, k := range sortedKeys(sub) {
					out = append(out, edge{ptr + "/" + kw + "/" + escapeToken(k), sub[k]})
				}
				continue
			}
			out = append(out, edge{ptr + "/" + kw, sub})
		}
	}
	return out
}
