package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/upstreams"
)

// upstreamHistory remembers, per upstream, what its status callbacks said since the gateway
// started: the last failure and when, and how many times it went down after being up (the same
// count as toolgate_upstream_restarts_total). The upstreams page shows it.
type upstreamHistory struct {
	mu  sync.Mutex
	now func() time.Time
	by  map[string]*upstreamEvents
}

type upstreamEvents struct {
	up        bool
	lastError string
	at        time.Time
	restarts  int
}

// watchUpstreams starts the history from each server's status now (a server down at start has
// its reason as its last error) and follows set's status changes.
func watchUpstreams(set *upstreams.Set, servers []string, now func() time.Time) *upstreamHistory {
	h := &upstreamHistory{now: now, by: map[string]*upstreamEvents{}}
	for _, server := range servers {
		up, why := set.Status(server)
		ev := &upstreamEvents{up: up}
		if !up {
			ev.lastError, ev.at = why, now()
		}
		h.by[server] = ev
	}
	set.OnStatusChange(h.changed)
	return h
}

func (h *upstreamHistory) changed(server string, up bool, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.by[server]
	if ev == nil {
		ev = &upstreamEvents{}
		h.by[server] = ev
	}
	if ev.up && !up {
		ev.restarts++
	}
	if !up && why != "" {
		ev.lastError, ev.at = why, h.now()
	}
	ev.up = up
}

func (h *upstreamHistory) get(server string) upstreamEvents {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev := h.by[server]; ev != nil {
		return *ev
	}
	return upstreamEvents{}
}

// consolePages are what the console's pages beside approvals read from the gateway.
func (g *Gateway) consolePages() console.Pages {
	p := console.Pages{Stages: g.chain.Names(), Upstreams: g.consoleUpstreams, ApprovePin: g.approvePin}
	if g.audit != nil {
		p.Recent, p.AuditPath = g.audit.Recent, g.cfg.AuditPath()
	}
	return p
}

// consoleUpstreams is every configured server as the upstreams page shows it, in name order, with
// its tools (callable, blocked by pinning, quarantined) from the catalog in force.
func (g *Gateway) consoleUpstreams() []console.Upstream {
	cat := g.set.Catalog()
	byServer := map[string][]console.UpstreamTool{}
	for _, t := range cat.Tools() {
		if t.Unreachable || t.Changed {
			continue // stand-ins: a down server's tools, blocked ones (listed from Changed below)
		}
		byServer[t.Server] = append(byServer[t.Server], g.toolPin(t))
	}
	for _, ch := range cat.Changed() {
		ut := console.UpstreamTool{Name: ch.Name, ID: ch.ID, Pin: console.PinChanged, Hash: ch.NewHash,
			OldHash: ch.Pin.Hash, Diff: ch.Diff()}
		if ch.Pending {
			ut.Pin = console.PinNew
		}
		byServer[ch.Server] = append(byServer[ch.Server], ut)
	}
	for _, q := range cat.Quarantined() {
		byServer[q.Server] = append(byServer[q.Server], console.UpstreamTool{Name: q.Upstream, ID: q.Server + "/" + q.Upstream,
			Pin: console.PinQuarantined, Note: q.Reason})
	}
	var out []console.Upstream
	for _, server := range g.cfg.ServerNames() {
		up, why := g.set.Status(server)
		ev := g.history.get(server)
		u := console.Upstream{Name: server, Connected: up, Down: why, Breaker: g.breakers.State(server),
			LastError: ev.lastError, LastErrorAt: ev.at, Restarts: ev.restarts, Tools: byServer[server]}
		if l := g.inFlight[server]; l != nil {
			u.InFlight, u.MaxFlight = l.InFlight(), l.Limit()
		}
		out = append(out, u)
	}
	return out
}

// toolPin is a callable tool's pin state.
func (g *Gateway) toolPin(t *upstreams.Tool) console.UpstreamTool {
	ut := console.UpstreamTool{Name: t.Name, ID: t.ID, Hash: t.Hash, Pin: console.PinOff}
	if g.pins == nil || g.pins.Mode() == pins.Off || t.Hash == "" {
		return ut
	}
	ut.Pin = console.PinPinned
	if e, ok := g.pins.Pin(t.ID); ok {
		ut.PinnedAt = e.ApprovedAt
	}
	return ut
}

// approvePin approves, for the console, the definition a blocked tool lists now, provided it is
// still the one the approver saw (hash): the same pins.Store.Approve as `toolgate pins approve
// --hash`, then a pin_change record in the audit trail under the approver's name, and the catalog
// rebuilt at once (the pin file watch would do it too, a moment later).
func (g *Gateway) approvePin(_ context.Context, approver, id, hash string) error {
	g.pinApprovals.Lock() // one at a time: two approvers never both check, then approve on top of each other
	defer g.pinApprovals.Unlock()
	if g.pins == nil {
		return console.ErrNotBlocked
	}
	var found *upstreams.ChangedTool
	for _, ch := range g.set.Catalog().Changed() {
		if ch.ID == id {
			found = &ch
			break
		}
	}
	switch {
	case found == nil:
		return console.ErrNotBlocked
	case found.NewHash != hash:
		return console.ErrPinMoved
	}
	// Marked before the file is written: its watch may rebuild the catalog before this returns.
	g.consolePinned.Store(found.ID+" "+found.NewHash, true)
	if err := g.pins.Approve(found.ID, found.New); err != nil {
		g.consolePinned.Delete(found.ID + " " + found.NewHash)
		return err
	}
	if g.audit != nil {
		rec := audit.Record{Kind: audit.KindPinChange, Principal: approver, Tool: found.ID, Decision: audit.DecisionApproved,
			Reason: "definition approved in the console", Details: map[string]any{"old_hash": found.Pin.Hash, "new_hash": found.NewHash, "via": "console"}}
		if err := g.audit.Append(rec); err != nil {
			g.log.Error("audit record not written", "kind", rec.Kind, "err", err)
		}
	}
	if err := g.set.ReloadPins(); err != nil {
		g.log.Error("tool pins not reloaded after an approval; the pin file watch will retry", "err", err)
	}
	return nil
}
