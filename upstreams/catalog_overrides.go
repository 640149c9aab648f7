package upstreams

import (
	"fmt"

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
