package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a config file, precise enough to fix without reading the source.
type Problem struct {
	File string // the path as given to Load, so it matches what the operator typed
	Line int    // 1-based; 0 when not tied to a line
	Key  string // key path such as mcpServers.orders.timeout; "" for the file as a whole
	Msg  string // what was expected and what was found
}

// String formats p as "file:line: key: msg", leaving out the parts that are unknown.
func (p Problem) String() string {
	loc := p.File
	if p.Line > 0 {
		loc += ":" + strconv.Itoa(p.Line)
	}
	parts := make([]string, 0, 3)
	for _, s := range []string{loc, p.Key, p.Msg} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// Problems is the error returned by Load and Parse: every problem found, in file order.
type Problems struct {
	List []Problem
}

// Error lists one problem per line.
func (ps *Problems) Error() string {
	lines := make([]string, len(ps.List))
	for i, p := range ps.List {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sortProblems orders problems by line so the report reads top to bottom; whole-file problems (line 0)
// come first. The sort is stable so problems on one line keep the order they were found in.
func sortProblems(list []Problem) {
	slices.SortStableFunc(list, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
}
