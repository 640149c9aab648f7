package toolschema

import (
	"maps"
	"slices"
)

// maxEvaluations bounds how many subschema evaluations one instance value
// may cost in the worst case. Without it, a schema whose $defs branch into
// each other (a0: allOf [a1, a1], a1: allOf [a2, a2], ...) is acyclic and
// 1.5 KB long yet costs 2^20 evaluations (5 s) per call, and one whose
// recursion doubles per level (node: allOf [{properties:{x:node}},
// {properties:{x:node}}]) costs 2^depth. Real schemas stay in the tens.
const maxEvaluations = 1000

// maxAnalysisWork bounds checkFanOut itself (profile entries touched, over
// all levels), so that the check cannot become the denial of service.
// Large real schemas need a few tens of thousands.
const maxAnalysisWork = 2_000_000

// fanGraph is the part of a schema reachable from the root, with node ids.
type fanGraph struct {
	scan     *scan
	ids      map[string]int
	vals     []any
	ptrs     []string
	inPlace  [][]int
	children []childIDs
	order    []int     // in-place DAG, children before parents
	profiles []profile // scratch for level, reused across levels
	work     int
}

// childIDs is children with node ids.
type childIDs struct {
	named                 map[string][]int
	anyKey, anyItem, keys []int
}

// checkFanOut bounds, level by level, U_k(s): the evaluations that one
// value at instance depth k can cost below one evaluation of schema s at
// depth 0, for the worst choice of child at each level. U_0(s) counts s
// and its in-place subschemas (with multiplicity: a $ref reached twice
// costs twice). For k > 0, every schema evaluated on a value (s and its
// in-place closure) contributes, for the chosen child, the U_(k-1) of the
// subschemas it applies to that child; the worst child is taken jointly
// for the whole closure, which is what keeps recursive unions such as
// filter: anyOf [{and:[filter]}, {or:[filter]}, {not:filter}] linear.
//
// The schema is rejected if some value could cost more than
// maxEvaluations. Levels stop when nothing is left below, when the values
// repeat (U_k depends only on U_(k-1)), or at maxInstanceDepth, the
// deepest an instance may be. Runs after findRefCycle, so the in-place
// graph is acyclic.
func checkFanOut(s *scan) error {
	g := newFanGraph(s)
	cur := g.level0()
	if i := slices.IndexFunc(cur, func(u int) bool { return u > maxEvaluations }); i >= 0 {
		return rejectf("%s could apply more than %d subschemas to a single value: $refs that branch into shared schemas multiply", where(g.ptrs[i]), maxEvaluations)
	}
	history := [][]int{cur}
	for depth := 1; depth <= maxInstanceDepth && cur[0] > 0; depth++ {
		cur = g.level(cur)
		if cur[0] > maxEvaluations {
			return rejectf("a single value at nesting depth %d could need more than %d subschema evaluations: $refs that branch into shared schemas multiply", depth, maxEvaluations)
		}
		if g.work > maxAnalysisWork {
			return rejectf("too complex to bound its validation cost (more than %d steps of analysis)", maxAnalysisWork)
		}
		if repeats(history, cur) {
			return nil
		}
		history = append(history[max(0, len(history)-maxPeriod+1):], cur)
	}
	return nil
}

// maxPeriod is how far back repeats looks: recursion through an array of
// arrays of nodes repeats every 3 levels; 8 leaves room.
const maxPeriod = 8

// repeats reports whether cur equals one of the last few levels; the
// sequence is then periodic and no later level can be worse.
func repeats(history [][]int, cur []int) bool {
	for i := len(history) - 1; i >= max(0, len(history)-maxPeriod); i-- {
		if slices.Equal(history[i], cur) {
			return true
		}
	}
	return false
}

func newFanGraph(s *scan) *fanGraph {
	g := &fanGraph{scan: s, ids: map[string]int{}}
	g.id("", s.root)
	for n := 0; n < len(g.vals); n++ { // g.vals grows as nodes are found
		g.expand(n)
	}
	visited := make([]bool, len(g.vals))
	for n := range g.vals {
		g.postorder(n, visited)
	}
	return g
}

func (g *fanGraph) id(ptr string, v any) int {
	if n, ok := g.ids[ptr]; ok {
		return n
	}
	n := len(g.vals)
	g.ids[ptr] = n
	g.vals = append(g.vals, v)
	g.ptrs = append(g.ptrs, ptr)
	g.inPlace = append(g.inPlace, nil)
	g.children = append(g.children, childIDs{})
	return n
}

func (g *fanGraph) expand(n int) {
	ptr, v := g.ptrs[n], g.vals[n]
	for _, e := range inPlaceEdges(g.scan, ptr, v) {
		g.inPlace[n] = append(g.inPlace[n], g.id(e.ptr, e.v))
	}
	ch := childrenOf(g.scan, ptr, v)
	ids := childIDs{anyKey: g.idsOf(ch.anyKey), anyItem: g.idsOf(ch.anyItem), keys: g.idsOf(ch.keys)}
	for _, name := range sortedKeys(ch.named) {
		if ids.named == nil {
			ids.named = map[string][]int{}
		}
		ids.named[name] = g.idsOf(ch.named[name])
	}
	g.children[n] = ids
}

func (g *fanGraph) idsOf(edges []edge) []int {
	ids := make([]int, len(edges))
	for i, e := range edges {
		ids[i] = g.id(e.ptr, e.v)
	}
	return ids
}

// postorder appends n after its in-place children. The recursion depth is
// bounded by the number of nodes, itself bounded by Limits.MaxNodes.
func (g *fanGraph) postorder(n int, visited []bool) {
	if visited[n] {
		return
	}
	visited[n] = true
	for _, c := range g.inPlace[n] {
		g.postorder(c, visited)
	}
	g.order = append(g.order, n)
}

// level0 counts in-place evaluations: U_0(s) = 1 + Σ U_0(c).
func (g *fanGraph) level0() []int {
	cur := make([]int, len(g.vals))
	for _, n := range g.order {
		total := 1
		for _, c := range g.inPlace[n] {
			total = capped(total + cur[c])
		}
		cur[n] = total
	}
	return cur
}

// level computes U_k from U_(k-1) in prev through per-node profiles.
func (g *fanGraph) level(prev []int) []int {
	if g.profiles == nil {
		g.profiles = make([]profile, len(g.vals))
	}
	cur := make([]int, len(g.vals))
	for _, n := range g.order {
		p := g.own(n, prev)
		for _, c := range g.inPlace[n] {
			g.work += p.add(&g.profiles[c])
		}
		g.profiles[n] = p
		cur[n] = capped(p.worst())
	}
	return cur
}

// own is the profile of node n alone: what each kind of child costs.
func (g *fanGraph) own(n int, prev []int) profile {
	ch := g.children[n]
	p := profile{anyKey: sum(ch.anyKey, prev), anyItem: sum(ch.anyItem, prev), keys: sum(ch.keys, prev)}
	for name, ids := range ch.named {
		v := sum(ids, prev)
		if v == p.fallback(name) {
			continue // same as not naming it; keeps exhausted levels cheap
		}
		if p.named == nil {
			p.named = map[string]int{}
		}
		p.named[name] = v
	}
	g.work += len(ch.named)
	return p
}

func sum(ids []int, vals []int) int {
	total := 0
	for _, id := range ids {
		total += vals[id]
	}
	return total
}

// capped keeps values just above the budget so they stay small; anything
// above maxEvaluations is rejected anyway.
func capped(v int) int { return min(v, maxEvaluations+1) }

// profile is the cost of each kind of child of one value, summed over the
// schemas evaluated on it. Children not named fall back to anyKey (names)
// or anyItem (indices). Sums are exact (no capping) so that add stays
// linear; they fit easily: inputs are capped, and in-place path counts
// were checked at level 0.
type profile struct {
	named                 map[string]int
	anyKey, anyItem, keys int
	shared                bool // named belongs to another profile: copy before writing
}

func (p *profile) isZero() bool {
	return len(p.named) == 0 && p.anyKey == 0 && p.anyItem == 0 && p.keys == 0
}

func (p *profile) fallback(name string) int {
	if name[0] == 'k' {
		return p.anyKey
	}
	return p.anyItem
}

// add sums q into p: a child named only on one side costs that side's
// value plus the other side's fallback. It returns the work done. Adding
// to an empty profile (a bare {"$ref": ...}, the common case) shares q's
// map instead of copying it.
func (p *profile) add(q *profile) int {
	switch {
	case q.isZero():
		return 1
	case p.isZero():
		*p = profile{named: q.named, anyKey: q.anyKey, anyItem: q.anyItem, keys: q.keys, shared: q.named != nil}
		return 1
	case p.shared:
		p.named, p.shared = maps.Clone(p.named), false
	}
	for name, v := range p.named {
		if _, inQ := q.named[name]; !inQ {
			p.named[name] = v + q.fallback(name)
		}
	}
	for name, qv := range q.named {
		pv, inP := p.named[name]
		if !inP {
			pv = p.fallback(name)
		}
		if p.named == nil {
			p.named = map[string]int{}
		}
		p.named[name] = pv + qv
	}
	p.anyKey += q.anyKey
	p.anyItem += q.anyItem
	p.keys += q.keys
	return len(p.named) + len(q.named) + 1
}

func (p *profile) worst() int {
	w := max(p.anyKey, p.anyItem, p.keys)
	for _, v := range p.named {
		w = max(w, v)
	}
	return w
}
