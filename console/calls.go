package console

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/audit"
)

// RecentCalls is how many audit lines the gateway keeps in memory for the live calls page
// (audit.Options.KeepRecent): about 0.5 MB for 1,000 call lines without arguments.
const RecentCalls = 1000

// The outcomes the live calls page filters on: the audit record's decision.
var callOutcomes = []string{string(audit.DecisionAllowed), string(audit.DecisionDenied), string(audit.DecisionFailed),
	string(audit.DecisionApprovalRequired)}

// callRow is one call as the live calls page lists it. Every string is from the audit record and
// is escaped where the template uses it.
type callRow struct {
	Seq        uint64
	Time       time.Time
	Principal  string
	Tool       string // canonical, or the name asked for when it resolved to nothing
	Decision   string
	ErrorCode  string
	Stage      string
	DurationMS int64
}

type callsPage struct {
	page
	Off                      bool // no audit trail, or nothing kept
	Calls                    []callRow
	Kept                     int // call records kept in memory
	Principal, Tool, Outcome string
	Outcomes                 []string
	Principals, Tools        []string // seen among the kept calls, for the filter's suggestions
	Follow                   bool     // the page reloads itself every followEvery
	FollowURL, StopURL       string   // this view with and without following
}

// followEvery is how often a followed live calls page reloads itself (a meta refresh: no script).
// A page of 1,000 calls is about 10 KB gzipped, so following costs about 2 KB/s.
const followEvery = 5

// callRecord is a kept line decoded.
type callRecord struct {
	audit.Record
	raw []byte
}

// recentCalls decodes the kept lines of kind call, newest first. A line that does not decode is
// skipped: the page shows what it can, and Verify is what judges the trail.
func (c *Console) recentCalls() []callRecord {
	if c.o.Recent == nil {
		return nil
	}
	lines := c.o.Recent(0)
	out := make([]callRecord, 0, len(lines))
	for _, ln := range lines {
		if !bytes.Contains(ln, []byte(`"kind":"call"`)) {
			continue // approvals, reloads, pin changes: not calls
		}
		var r callRecord
		if json.Unmarshal(ln, &r.Record) != nil || r.Kind != audit.KindCall {
			continue
		}
		r.raw = ln
		out = append(out, r)
	}
	return out
}

// calledTool is the tool a record names: the canonical one, or the name the client asked for when
// it resolved to nothing.
func calledTool(r *audit.Record) string {
	if r.Tool != "" {
		return r.Tool
	}
	if s, ok := r.Details["requested"].(string); ok {
		return s
	}
	return ""
}

func (c *Console) callsPage(w http.ResponseWriter, r *http.Request, s *Session) {
	q := r.URL.Query()
	p := callsPage{page: c.base(r, s, "Live calls", ""), Outcomes: callOutcomes,
		Principal: strings.TrimSpace(q.Get("principal")), Tool: strings.TrimSpace(q.Get("tool")), Outcome: q.Get("outcome")}
	if c.o.Recent == nil {
		p.Off = true
		c.render(w, r, http.StatusOK, "calls", p)
		return
	}
	calls := c.recentCalls()
	p.Kept = len(calls)
	principals, tools := map[string]bool{}, map[string]bool{}
	for i := range calls {
		rec := &calls[i].Record
		tool := calledTool(rec)
		principals[rec.Principal], tools[tool] = true, true
		if (p.Principal != "" && rec.Principal != p.Principal) || (p.Tool != "" && tool != p.Tool) ||
			(p.Outcome != "" && string(rec.Decision) != p.Outcome) {
			continue
		}
		p.Calls = append(p.Calls, callRow{Seq: rec.Seq, Time: rec.Time, Principal: rec.Principal, Tool: tool,
			Decision: string(rec.Decision), ErrorCode: rec.ErrorCode, Stage: rec.Stage, DurationMS: rec.DurationMS})
	}
	p.Principals, p.Tools = sortedKeys(principals), sortedKeys(tools)
	p.Follow = q.Get("follow") == "1"
	view := url.Values{}
	for k, v := range map[string]string{"principal": p.Principal, "tool": p.Tool, "outcome": p.Outcome} {
		if v != "" {
			view.Set(k, v)
		}
	}
	p.StopURL = "/ui/calls"
	if len(view) > 0 {
		p.StopURL += "?" + view.Encode()
	}
	view.Set("follow", "1")
	p.FollowURL = "/ui/calls?" + view.Encode()
	if p.Follow {
		p.Refresh = followEvery
	}
	c.render(w, r, http.StatusOK, "calls", p)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// stageRow is one link of the call chain as a call's detail page shows it.
type stageRow struct {
	Name  string
	State string // passed, stopped, not reached, unknown, recorded
	Note  string
}

// Class is State as a CSS class.
func (s stageRow) Class() string { return strings.ReplaceAll(s.State, " ", "-") }

type callPage struct {
	page
	Call     callRow
	Record   audit.Record
	Session  string
	Digest   string
	Reason   string
	Attempts int
	Policy   string
	Stages   []stageRow
	Line     string // the line as written, indented
	LineHash string // its SHA-256: the next line's prev
	Filter   string // a link back to the list, filtered on this call's principal
}

func (c *Console) callPage(w http.ResponseWriter, r *http.Request, s *Session) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	var found *callRecord
	if err == nil {
		calls := c.recentCalls()
		for i := range calls {
			if calls[i].Seq == seq {
				found = &calls[i]
				break
			}
		}
	}
	if found == nil {
		c.render(w, r, http.StatusNotFound, "message", c.base(r, s, "No such call",
			"That call is not among the last calls kept in memory. Every call is in the audit trail; `toolgate audit` reads it."))
		return
	}
	rec := found.Record
	tool := calledTool(&rec)
	p := callPage{page: c.base(r, s, "Call "+strconv.FormatUint(rec.Seq, 10), ""), Record: rec,
		Call: callRow{Seq: rec.Seq, Time: rec.Time, Principal: rec.Principal, Tool: tool, Decision: string(rec.Decision),
			ErrorCode: rec.ErrorCode, Stage: rec.Stage, DurationMS: rec.DurationMS},
		Session: rec.Session, Digest: rec.ArgsDigest, Reason: rec.Reason, Attempts: rec.Attempts, Policy: rec.PolicyVersion,
		Stages: c.stages(&rec), Filter: "/ui/calls?principal=" + url.QueryEscape(rec.Principal)}
	sum := sha256.Sum256(found.raw)
	p.LineHash = hex.EncodeToString(sum[:])
	p.Line = pretty(found.raw)
	c.render(w, r, http.StatusOK, "call", p)
}

// stages says what each link of the chain decided about the call, from what its audit record
// holds: the links before the one that stopped it passed it on, that one stopped it (with the
// error code and the reason), the ones after it never saw it. A call that succeeded passed every
// link. A record without a stage (written before toolgate recorded it) shows the outcome only.
func (c *Console) stages(rec *audit.Record) []stageRow {
	stopped := rec.Decision != audit.DecisionAllowed
	known := !stopped || slices.Contains(c.o.Stages, rec.Stage)
	rows := make([]stageRow, 0, len(c.o.Stages))
	reached := true
	for _, name := range c.o.Stages {
		row := stageRow{Name: name, State: "passed"}
		switch {
		case !known:
			row.State = "unknown"
		case !reached:
			row.State = "not reached"
		case stopped && name == rec.Stage:
			row.State = "stopped"
			row.Note = strings.TrimSpace(rec.ErrorCode + ": " + rec.Reason)
			reached = false
		}
		if row.State == "passed" {
			row.Note = passedNote(name, rec)
		}
		if name == "record" {
			row.State, row.Note = "recorded", fmt.Sprintf("audit record %d", rec.Seq)
		}
		rows = append(rows, row)
	}
	return rows
}

// passedNote is what a link that let the call through adds, where the record says.
func passedNote(stage string, rec *audit.Record) string {
	switch stage {
	case "authenticate":
		return "as " + rec.Principal
	case "resolve":
		return rec.Tool
	case "shadow":
		if sh := rec.Shadow; sh != nil {
			return fmt.Sprintf("the shadow policy %s would have decided %s (%s), the live policy %s (%s)",
				sh.Version, sh.Decision, cmp.Or(sh.Rule, "no line"), sh.LiveDecision, cmp.Or(sh.LiveRule, "no line"))
		}
	case "conditions":
		if rec.Decision == audit.DecisionAllowed && rec.Reason != "" {
			return "allowed by " + shortRule(rec.Reason)
		}
	case "approve":
		if id, _ := rec.Details["approval"].(string); id != "" {
			return "ran on approval " + id
		}
	case "dedup":
		if d, _ := rec.Details["dedup"].(string); d != "" {
			return d
		}
	case "execute":
		if rec.Attempts > 0 {
			return fmt.Sprintf("%d upstream attempt(s)", rec.Attempts)
		}
	}
	return ""
}
