package upstreams

import (
	"fmt"
	"maps"
	"slices"

	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

// applyOverrides applies each candidate's override (its client-facing name
// was set by entry, so that collisions are found with every other name)
// after the description scan, so that the scan judges what the upstream
// wrote and the override replaces or extends what the scan kept. A tool
// whose override does not fit its upstream's schema is quarantined with
// the reason: the operator's mistake about one tool does not stop the
// others. Pinning, which follows, still hashes the upstream's own
// definition: the override is configuration, not something an upstream can
// change.
func (c *Catalog) applyOverrides(admitted []*Tool) []*Tool {
	kept := admitted[:0:0]
	for _, t := range admitted {
		o := t.override
		t.override = nil
		if o == nil {
			kept = append(kept, t)
			continue
		}
		a, err := overrides.Apply(o, t.InputSchema)
		if err != nil {
			c.quarantine(t.Server, t.Upstream, fmt.Sprintf("tool override (mcpServers.%s.tools.%s.override): %v", t.Server, t.Upstream, err))
			continue
		}
		t.Override = a
		t.InputSchema, t.Input = a.Schema, a.Input
		if o.Title != nil {
			t.Title = sanitize.Text(*o.Title)
		}
		t.Description = sanitize.Text(o.Describe(t.Description))
		t.Annotations = o.Annotate(t.Annotations)
		kept = append(kept, t)
	}
	return kept
}

// overridesOfUnlisted warns of each override of a tool the server does
// not list: it applies to nothing (the tool was removed or renamed
// upstream, or the name is misspelt), and a client looking for its
// client-facing name gets tool_not_found.
func overridesOfUnlisted(srv *Server, listed []Listed) []string {
	var out []string
	for _, tool := range slices.Sorted(maps.Keys(srv.Overrides)) {
		if srv.Overrides[tool] == nil || slices.ContainsFunc(listed, func(l Listed) bool { return l.Name == tool }) {
			continue
		}
		w := fmt.Sprintf("mcpServers.%s.tools.%s.override: server %s lists no tool %q, so the override applies to nothing", srv.Name, tool, srv.Name, tool)
		if name := srv.Overrides[tool].Name; name != "" {
			w += fmt.Sprintf(" and %q answers tool_not_found", name)
		}
		out = append(out, sanitize.Text(w))
	}
	return out
}

// renamedDown knows the tools an override renames on servers that are
// down, from the configuration alone: the new name resolves to an
// Unreachable stand-in (upstream_unavailable, as the tool would answer
// under its upstream name), and the old one does not resolve at all, as
// when the server is up.
type renamedDown struct {
	byName map[string]*Tool    // client-facing name -> its stand-in's fields
	gone   map[string]struct{} // <server>/<tool> of every renamed tool
}

func (r *renamedDown) add(srv *Server) {
	for tool, o := range srv.Overrides {
		if o == nil || o.Name == "" || !validName.MatchString(o.Name) || !validName.MatchString(tool) {
			continue
		}
		if r.byName == nil {
			r.byName, r.gone = map[string]*Tool{}, map[string]struct{}{}
		}
		r.byName[o.Name] = &Tool{Name: o.Name, ID: srv.Name + "/" + tool, Server: srv.Name, Upstream: tool}
		r.gone[srv.Name+"/"+tool] = struct{}{}
	}
}

func (r *renamedDown) resolve(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return &Tool{Name: t.Name, ID: t.ID, Server: t.Server, Upstream: t.Upstream, Unreachable: true}, true
}

func (r *renamedDown) away(server, tool string) bool {
	_, ok := r.gone[server+"/"+tool]
	return ok
}
