package console

import (
	"context"
	"net/http"
)

// Pages are what the console's pages beside approvals read: live calls, upstreams and pins, and the
// audit trail. Each is optional; a page whose source is not given says so instead of showing an
// empty list that would read as "nothing happened".
type Pages struct {
	// Recent returns up to max of the last audit lines, newest first (audit.Log.Recent): the live
	// calls page and each call's detail.
	Recent func(max int) [][]byte
	// Stages are the call chain's links in the order they run (pipeline.Chain.Names), for what
	// each decided about a call.
	Stages []string
	// AuditPath is audit.file, verified from the audit page; "" when the trail is off.
	AuditPath string
	// Upstreams is the upstreams page: every configured server, its health and its tools.
	Upstreams func() []Upstream
	// ApprovePin approves the definition of the blocked tool id that has hash now, under the
	// approver's name (pins.Store.Approve, written to the audit trail); ErrPinMoved when its
	// definition is no longer that one, ErrNotBlocked when pinning does not block it.
	ApprovePin func(ctx context.Context, approver, id, hash string) error
}

// routePages serves the pages beside approvals, each behind a session like every other page.
func (c *Console) routePages(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/calls", c.withSession(c.callsPage))
	mux.HandleFunc("GET /ui/calls/{seq}", c.withSession(c.callPage))
	mux.HandleFunc("GET /ui/upstreams", c.withSession(c.upstreamsPage))
	mux.HandleFunc("POST /ui/upstreams/pins", c.withSession(c.approvePin))
	mux.HandleFunc("GET /ui/audit", c.withSession(c.auditPage))
	mux.HandleFunc("POST /ui/audit/verify", c.withSession(c.verifyAudit))
}
