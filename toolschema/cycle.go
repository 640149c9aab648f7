package toolschema

import "strings"

type visitState uint8

const (
	unvisited visitState = iota
	visiting
	visited
)

type cycleFinder struct {
	scan  *scan
	state map[string]visitState
	stack []string
}

// findRefCycle rejects schemas where references loop back without
// descending into the instance: {"$ref":"#"}, a -> b -> a, or
// {"anyOf":[{"$ref":"#"}]}. Legitimately recursive schemas (a tree node
// whose children.items refers to the node) pass. Every such loop contains a
// reference, so searching from each reference's holder finds all of them.
// Recursion depth is bounded by the number of schema locations, which the
// node limit bounds.
func findRefCycle(s *scan) error {
	f := &cycleFinder{scan: s, state: map[string]visitState{}}
	for _, r := range s.refs {
		if err := f.visit(r.at, r.holder); err != nil {
			return err
		}
	}
	return nil
}

func (f *cycleFinder) visit(ptr string, v any) error {
	switch f.state[ptr] {
	case visiting:
		return f.cycleError(ptr)
	case visited:
		return nil
	}
	f.state[ptr] = visiting
	f.stack = append(f.stack, ptr)
	for _, e := range inPlaceEdges(f.scan, ptr, v) {
		if err := f.visit(e.ptr, e.v); err != nil {
			return err
		}
	}
	f.stack = f.stack[:len(f.stack)-1]
	f.state[ptr] = visited
	return nil
}

// cycleError names the loop, e.g. "#/$defs/a -> #/$defs/b -> #/$defs/a".
func (f *cycleFinder) cycleError(ptr string) error {
	start := 0
	for i, p := range f.stack {
		if p == ptr {
			start = i
		}
	}
	hops := make([]string, 0, len(f.stack)-start+1)
	for _, p := range f.stack[start:] {
		hops = append(hops, "#"+p)
	}
	hops = append(hops, "#"+ptr)
	return rejectf("cyclic $ref: %s loops back without descending into a property or item, so validation would never finish",
		truncate(strings.Join(hops, " -> "), 200))
}
