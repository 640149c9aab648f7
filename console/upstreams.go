package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/authz"
)

// Upstream is one configured upstream server as the upstreams page shows it; the gateway fills it
// from its upstream set, breakers, in-flight limits and status history (gateway/console.go).
type Upstream struct {
	Name      string
	Connected bool
	Down      string // why it is not connected
	Breaker   string // closed, open, half-open
	InFlight  int    // calls running on it now
	MaxFlight int    // its limits.max_in_flight
	// LastError is the last failure to start, reach or keep it, and when; "" when none since start.
	LastError   string
	LastErrorAt time.Time
	Restarts    int // times it went down after being up, since the gateway started
	Tools       []UpstreamTool
}

// Pin states of a tool.
const (
	PinPinned      = "pinned"      // its definition matches its approved pin
	PinOff         = "not pinned"  // pinning: off
	PinChanged     = "changed"     // its definition differs from its pin: blocked
	PinNew         = "new"         // strict pinning, never approved: blocked
	PinQuarantined = "quarantined" // a name claimed twice or refused: not listed
)

// UpstreamTool is one tool of an upstream and its pin state.
type UpstreamTool struct {
	Name     string // client-facing
	ID       string // <server>/<tool>
	Pin      string // one of the Pin constants
	Hash     string // the definition's hash as listed now
	PinnedAt time.Time
	Note     string // why it is quarantined
	// For a changed or new tool: the hash approved before and the diff from it (pins.Diff).
	OldHash string
	Diff    string
}

// Blocked reports whether approving the tool's definition would let it be called again.
func (t UpstreamTool) Blocked() bool { return t.Pin == PinChanged || t.Pin == PinNew }

// ErrPinMoved is ApprovePin's refusal when the tool's definition is no longer the one the
// approver saw (hash): it changed again, or someone approved it meanwhile.
var ErrPinMoved = errors.New("the tool's definition is no longer the one shown")

// ErrNotBlocked is ApprovePin's refusal for a tool that pinning does not block.
var ErrNotBlocked = errors.New("the tool is not blocked by pinning")

type upstreamsPage struct {
	page
	Off       bool
	Upstreams []upstreamView
	Blocked   int
}

type upstreamView struct {
	Upstream
	Tools []toolView
}

type toolView struct {
	UpstreamTool
	MayApprove bool
	WhyNot     string
	DiffLines  []diffLine
}

type diffLine struct{ Text, Class string }

func (c *Console) upstreamsPage(w http.ResponseWriter, r *http.Request, s *Session) {
	p := upstreamsPage{page: c.base(r, s, "Upstreams", "")}
	if id := r.URL.Query().Get("approved"); id != "" {
		p.Notice = "You approved the new definition of " + id + "; it can be called again."
	}
	c.renderUpstreams(w, r, s, http.StatusOK, p)
}

func (c *Console) renderUpstreams(w http.ResponseWriter, r *http.Request, s *Session, status int, p upstreamsPage) {
	if c.o.Upstreams == nil {
		p.Off = true
		c.render(w, r, status, "upstreams", p)
		return
	}
	pol := c.o.Policy()
	for _, u := range c.o.Upstreams() {
		v := upstreamView{Upstream: u}
		for _, t := range u.Tools {
			tv := toolView{UpstreamTool: t}
			if t.Blocked() {
				for _, line := range strings.Split(strings.TrimSuffix(t.Diff, "\n"), "\n") {
					tv.DiffLines = append(tv.DiffLines, diffLine{Text: line, Class: diffLineClass(line)})
				}
				p.Blocked++
				tv.WhyNot = c.mayPin(s.Approver, t.ID, pol)
				tv.MayApprove = tv.WhyNot == "" && c.o.ApprovePin != nil
			}
			v.Tools = append(v.Tools, tv)
		}
		p.Upstreams = append(p.Upstreams, v)
	}
	c.render(w, r, status, "upstreams", p)
}

// mayPin is "" when approver may approve a new definition of the tool id, else why not: the
// policy's pin action, asked with the approver's name, as approve is for held calls.
func (c *Console) mayPin(approver, id string, pol *authz.Policy) string {
	if pol == nil {
		return "No policy is loaded, so nobody may approve it."
	}
	d := pol.Decide(authz.Request{Subject: authz.Subject{Principal: approver}, Object: id, Action: authz.ActPin})
	if !d.Allowed {
		return "The policy does not let you approve definitions of " + id + " (no pin line for you or your roles applies)."
	}
	return ""
}

// approvePin approves the definition of a blocked tool, exactly the one the page showed (its hash
// is in the form): the same pins.Store.Approve that `toolgate pins approve --hash` runs, through
// Options.ApprovePin, which the gateway also writes to the audit trail under the approver's name.
func (c *Console) approvePin(w http.ResponseWriter, r *http.Request, s *Session) {
	id, hash := r.PostForm.Get("tool"), r.PostForm.Get("hash")
	refuse := func(status int, msg string) {
		p := upstreamsPage{page: c.base(r, s, "Upstreams", "")}
		p.Error = msg
		c.renderUpstreams(w, r, s, status, p)
	}
	if c.o.ApprovePin == nil {
		refuse(http.StatusNotFound, "Tool pins cannot be approved here.")
		return
	}
	if id == "" || hash == "" {
		refuse(http.StatusBadRequest, "Which tool and which definition? Nothing was approved.")
		return
	}
	if why := c.mayPin(s.Approver, id, c.o.Policy()); why != "" {
		c.o.Log.Warn("console: pin approval refused", "approver", s.Approver, "tool", id, "why", why)
		refuse(http.StatusForbidden, why+" Nothing was approved.")
		return
	}
	err := c.o.ApprovePin(r.Context(), s.Approver, id, hash)
	switch {
	case errors.Is(err, ErrPinMoved):
		refuse(http.StatusConflict, "The definition of "+id+" is no longer the one you saw (it changed again, or was approved meanwhile); review it again. Nothing was approved.")
		return
	case errors.Is(err, ErrNotBlocked):
		refuse(http.StatusConflict, id+" is not blocked by pinning; nothing was approved.")
		return
	case err != nil:
		c.o.Log.Error("console: pin not approved", "tool", id, "err", err)
		refuse(http.StatusServiceUnavailable, "The pin file could not be written; nothing was approved. See the gateway log.")
		return
	}
	c.o.Log.Info("tool definition approved", "tool", id, "hash", hash, "by", s.Approver, "via", "console")
	http.Redirect(w, r, "/ui/upstreams?approved="+url.QueryEscape(id), http.StatusSeeOther)
}

// diffLineClass styles a line of a pin diff: added, removed, a hunk header, or context (a field's
// name, an unchanged line).
func diffLineClass(line string) string {
	switch {
	case strings.HasPrefix(line, "+"):
		return "add"
	case strings.HasPrefix(line, "-"):
		return "del"
	case strings.HasPrefix(line, "@@"):
		return "hunk"
	}
	return "ctx"
}
