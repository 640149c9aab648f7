package upstreams

import (
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/sanitize"
)

// ChangedTool is a tool that pinning keeps out of the callable catalog:
// its definition differs from its pin, or (strict mode) it has none yet.
type ChangedTool struct {
	Name, ID, Server, Upstream string
	// Pending: strict mode, no pin yet (a new tool awaiting its first
	// approval). Otherwise the definition changed since Pin was approved.
	Pending bool
	Pin     pins.Entry      // the approved pin; zero when Pending
	New     pins.Definition // the definition the upstream lists now
	NewHash string
}

// Reason says why the tool is blocked, in a sentence for the model (the
// message of tool_changed) and the log.
func (ch ChangedTool) Reason() string {
	if ch.Pending {
		return "this tool is new and has not been approved yet; an administrator must review and approve it before it can be called"
	}
	return "this tool's definition changed since it was approved; it is blocked until an administrator reviews and approves the change"
}

// Old is the approved definition; the zero Definition when Pending.
func (ch ChangedTool) Old() pins.Definition {
	if ch.Pending {
		return pins.Definition{}
	}
	d, err := ch.Pin.Def()
	if err != nil { // pins verified it when the file was read
		return pins.Definition{}
	}
	return d
}

// Diff is the readable diff from the approved definition to the new one
// (pins.Diff); for a pending tool, from nothing.
func (ch ChangedTool) Diff() string { return pins.Diff(ch.Old(), ch.New) }

// Changed returns the tools pinning blocks, sorted by client-facing name.
// Do not modify.
func (c *Catalog) Changed() []ChangedTool { return c.changed }

// Findings returns what the description scan found, in catalog build order
// (server by server). Do not modify.
func (c *Catalog) Findings() []Finding { return c.findings }

// Warnings are problems that did not stop the catalog, such as a new tofu
// pin that could not be written to the lock file.
func (c *Catalog) Warnings() []string { return c.warnings }

// definition is what pinning hashes: the listing as the upstream sent it,
// before any sanitising or stripping, so a change in hidden characters is
// a change too.
func (l Listed) definition() pins.Definition {
	return pins.Definition{Name: l.Name, Title: l.Title, Description: l.Description,
		InputSchema: l.InputSchema, OutputSchema: l.OutputSchema, Annotations: l.Annotations}
}

// scan runs the description scan on every candidate (scan.go) and returns
// the ones it does not quarantine, with what they advertise updated under
// strip. modes is each server's scan mode; claims holds every validly named
// tool, for the other-tool check.
func (c *Catalog) scan(modes map[string]ScanMode, admitted []*Tool, claims map[string][]*Tool) []*Tool {
	byServer := map[string]map[string]bool{} // server -> names of its tools
	for _, ts := range claims {
		for _, t := range ts {
			if byServer[t.Server] == nil {
				byServer[t.Server] = map[string]bool{}
			}
			byServer[t.Server][t.Name] = true
			byServer[t.Server][t.Upstream] = true
		}
	}
	others := map[string]map[string]bool{} // server -> names of other servers' tools
	othersOf := func(server string) map[string]bool {
		if o, ok := others[server]; ok {
			return o
		}
		o := map[string]bool{}
		for s, names := range byServer {
			if s == server {
				continue
			}
			for n := range names {
				if !byServer[server][n] && looksLikeIdentifier(n) {
					o[n] = true
				}
			}
		}
		others[server] = o
		return o
	}
	kept := admitted[:0:0]
	for _, t := range admitted {
		res := scanTool(modes[t.Server], t.Server, t.listed, othersOf(t.Server))
		c.findings = append(c.findings, res.findings...)
		if res.quarantine {
			c.quarantine(t.Server, t.Upstream, quarantineReason(res.findings))
			continue
		}
		t.Title, t.Description = res.title, res.description
		t.InputSchema, t.OutputSchema = res.inputSchema, res.outputSchema
		kept = append(kept, t)
	}
	return kept
}

// pin checks every candidate against store (nil: no pinning) and sorts it
// into the callable tools, the changed ones or the quarantined ones.
func (c *Catalog) pin(admitted []*Tool, store *pins.Store) {
	defer func() {
		for _, t := range admitted {
			t.listed = Listed{}
		}
	}()
	if store == nil {
		for _, t := range admitted {
			c.callable(t)
		}
		return
	}
	defs := make(map[string]pins.Definition, len(admitted))
	for _, t := range admitted {
		defs[t.ID] = t.listed.definition()
	}
	results, err := store.CheckAll(defs)
	if err != nil {
		c.warnings = append(c.warnings, sanitize.Text("tool pins: "+err.Error()))
	}
	for _, t := range admitted {
		r := results[t.ID]
		t.Hash = r.Hash
		switch r.Verdict {
		case pins.Pinned, pins.Recorded, pins.Unpinned:
			c.callable(t)
		case pins.Pending, pins.Changed:
			c.changed = append(c.changed, ChangedTool{Name: t.Name, ID: t.ID, Server: t.Server, Upstream: t.Upstream,
				Pending: r.Verdict == pins.Pending, Pin: r.Pin, New: defs[t.ID], NewHash: r.Hash})
		default: // Invalid
			why := r.Verdict.String()
			if r.Err != nil {
				why = r.Err.Error()
			}
			c.quarantine(t.Server, t.Upstream, "definition cannot be pinned: "+why)
		}
	}
}

func (c *Catalog) callable(t *Tool) {
	c.byName[t.Name] = t
	c.tools = append(c.tools, t)
}
