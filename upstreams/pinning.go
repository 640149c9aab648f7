package upstreams

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/pins"
)

// WithPins checks every listed tool against store whenever the catalog is
// built (see BuildWith): tools that are Pending or Changed are not callable
// and resolve to Changed stand-ins. Without it nothing is pinned. The
// caller opens the store (gateway.OpenPins, from pinning.file and
// pinning.mode); commands that only inspect should open it
// pins.WithoutRecording.
func WithPins(store *pins.Store) Option { return func(o *options) { o.pins = store } }

// Pins is the store given WithPins, or nil.
func (s *Set) Pins() *pins.Store { return s.opts.pins }

// ReloadPins re-reads the lock file and rebuilds the catalog against it
// (on SIGHUP, say); WatchPins does the same on every change of the file. A
// tool whose change an admin approved becomes callable, and clients are
// told (OnCatalogChange) when the catalog's shape changed. On error the
// store and the catalog stay as they were.
func (s *Set) ReloadPins() error {
	if s.opts.pins == nil {
		return nil
	}
	if err := s.opts.pins.Reload(); err != nil {
		return err
	}
	s.recheckPins()
	return nil
}

// WatchPins reloads the pins whenever the lock file changes (see
// pins.Store.Watch), until ctx ends; without WithPins it returns at once.
// A lock file that fails to load is logged and the last good pins kept.
// End it (cancel ctx) before Close.
func (s *Set) WatchPins(ctx context.Context) error {
	if s.opts.pins == nil {
		return nil
	}
	return s.opts.pins.Watch(ctx, func(err error) {
		if err != nil {
			s.log.Error("tool pins not reloaded; keeping the last good pins", "file", s.opts.pins.Path(), "err", err)
			return
		}
		s.recheckPins()
	})
}

// recheckPins rebuilds the catalog from the current listings and swaps it
// in if pinning decided anything differently.
func (s *Set) recheckPins() {
	s.mu.Lock()
	old := s.catalog.Load()
	cat, err := s.buildLocked()
	if err != nil {
		s.mu.Unlock()
		s.log.Error("tool catalog not rebuilt after a pins change; keeping the previous one", "err", err)
		return
	}
	if sameShape(old, cat) {
		s.mu.Unlock()
		return
	}
	s.catalog.Store(cat)
	s.mu.Unlock()
	wasBlocked := map[string]bool{}
	for _, ch := range old.Changed() {
		wasBlocked[ch.Name] = true
	}
	for _, t := range cat.Tools() {
		if wasBlocked[t.Name] {
			s.log.Info("tool approved; callable again", "tool", t.ID, "hash", t.Hash)
		}
	}
	for _, ch := range cat.Changed() {
		if !wasBlocked[ch.Name] {
			s.logChanged(ch)
		}
	}
	for _, w := range cat.Warnings() {
		s.log.Error("tool catalog", "warning", w)
	}
	s.log.Info("tool catalog rebuilt after a pins change", "tools", len(cat.Tools()), "blocked", len(cat.Changed()))
	s.notify()
}

// sameShape reports whether two catalogs agree on what is callable, what
// pinning blocks and what is quarantined, so that a reload that changes
// nothing (the gateway's own tofu write, say) does not churn clients.
func sameShape(a, b *Catalog) bool {
	key := func(c *Catalog) []string {
		var k []string
		for _, t := range c.Tools() {
			k = append(k, "tool "+t.Name+" "+t.ID+" "+t.Hash)
		}
		for _, ch := range c.Changed() {
			k = append(k, fmt.Sprintf("changed %s %s %s %v %s", ch.Name, ch.ID, ch.NewHash, ch.Pending, ch.Pin.Hash))
		}
		for _, q := range c.Quarantined() {
			k = append(k, "quarantined "+q.Server+"/"+q.Upstream+" "+q.Reason)
		}
		return k
	}
	return slices.Equal(key(a), key(b))
}

// logCatalog logs what a new catalog blocked, quarantined or flagged, for
// one server ("" for all).
func (s *Set) logCatalog(cat *Catalog, server string) {
	for _, q := range cat.Quarantined() {
		if server == "" || q.Server == server {
			s.log.Warn("tool quarantined", "server", q.Server, "tool", q.Upstream, "reason", q.Reason)
		}
	}
	for _, ch := range cat.Changed() {
		if server == "" || ch.Server == server {
			s.logChanged(ch)
		}
	}
	for _, f := range cat.Findings() {
		if server == "" || f.Server == server {
			s.log.Warn("tool description scan", "server", f.Server, "tool", f.Upstream, "where", f.Where,
				"kind", f.Kind, "detail", f.Detail, "action", f.Action)
		}
	}
	for _, w := range cat.Warnings() {
		s.log.Error("tool catalog", "warning", w)
	}
}

func (s *Set) logChanged(ch ChangedTool) {
	if ch.Pending {
		s.log.Warn("tool awaits approval (strict pinning); not callable", "tool", ch.ID, "hash", ch.NewHash,
			"review", "toolgate pins diff", "approve", "toolgate pins approve "+ch.Name)
		return
	}
	s.log.Warn("tool definition changed since it was approved; blocked (tool_changed)", "tool", ch.ID,
		"pinned", ch.Pin.Hash, "now", ch.NewHash, "review", "toolgate pins diff", "approve", "toolgate pins approve "+ch.Name)
}
