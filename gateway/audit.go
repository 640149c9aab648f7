package gateway

import (
	"log/slog"
	"sync"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/upstreams"
)

// openAudit opens the audit trail the config asks for (nil when it is
// disabled). Write failures are counted and logged as they happen. When
// another live toolgate process writes audit.file (an HTTP gateway and the
// stdio one a desktop client starts, on one config), this process writes a
// slot of its own beside it (audit.SlotPath, audit.DefaultSlots in all) and
// says so at startup.
func openAudit(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*audit.Log, error) {
	if !cfg.AuditEnabled() {
		return nil, nil
	}
	l, err := audit.Open(audit.Options{
		Path: cfg.AuditPath(), Fsync: audit.FsyncPolicy(cfg.AuditFsync()), FsyncInterval: cfg.AuditFsyncInterval(),
		MaxBytes: cfg.AuditMaxBytes(), MaxFiles: cfg.AuditMaxFiles(),
		IncludeArgs: cfg.AuditIncludeArgs(), Redact: cfg.AuditRedact(), FailClosed: cfg.AuditFailClosed(),
		KeepRecent: keepRecent(cfg),
		OnError: func(err error) {
			m.AuditWriteError()
			log.Error("audit trail write failed", "err", err)
		},
	})
	if err != nil {
		return nil, err
	}
	if l.Slot() == 1 {
		log.Info("writing the audit trail", "file", l.Path())
	} else {
		log.Info("writing the audit trail in a slot of its own: another live toolgate process writes audit.file",
			"file", l.Path(), "slot", l.Slot(), "audit.file", cfg.AuditPath())
	}
	return l, nil
}

// keepRecent is how many audit lines the trail keeps in memory: the console's live calls, when
// the console is served (console.RecentCalls, about 0.5 MB), else none.
func keepRecent(cfg *config.Config) int {
	if cfg.ConsoleEnabled() {
		return console.RecentCalls
	}
	return 0
}

// auditDecisions records what is decided outside calls: policy reloads,
// approvals, and tools that pinning blocks. (Calls are recorded by the
// chain's record link.)
func (g *Gateway) auditDecisions() {
	a, log := g.audit, g.log
	if a == nil {
		return
	}
	appendOrLog := func(r audit.Record) {
		if err := a.Append(r); err != nil {
			log.Error("audit record not written", "kind", r.Kind, "err", err)
		}
	}
	g.policy.OnReloadEvent(func(ev authz.ReloadEvent) { appendOrLog(reloadRecord(ev, g.toolIDs())) })
	g.approvals.OnDecision(func(req approvals.Request) { appendOrLog(approvalRecord(req)) })
	var seen sync.Map // "<id> <hash>" of blocked definitions already recorded
	blocked := func(cat *upstreams.Catalog) {
		for _, ch := range cat.Changed() {
			if _, dup := seen.LoadOrStore(ch.ID+" "+ch.NewHash, true); !dup {
				appendOrLog(pinRecord(ch))
			}
		}
	}
	blocked(g.set.Catalog())
	g.set.OnCatalogChange(blocked)
	g.set.OnCatalogChange(g.pinApprovalRecorder(g.set.Catalog(), appendOrLog))
}

// pinApprovalRecorder records a tool that pinning blocked and that is callable now with the
// definition it was blocked for: someone approved it. The console records its own approvals, with
// the approver's name (approvePin); any other (`toolgate pins approve`, an edit of the pin file) is
// recorded here, without a name: the file does not say who wrote it.
func (g *Gateway) pinApprovalRecorder(first *upstreams.Catalog, appendOrLog func(audit.Record)) func(*upstreams.Catalog) {
	var mu sync.Mutex
	wasBlocked := blockedHashes(first)
	return func(cat *upstreams.Catalog) {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range cat.Tools() {
			hash, was := wasBlocked[t.ID]
			if !was || t.Changed || t.Unreachable || t.Hash != hash {
				continue
			}
			if _, byConsole := g.consolePinned.LoadAndDelete(t.ID + " " + hash); byConsole {
				continue
			}
			appendOrLog(audit.Record{Kind: audit.KindPinChange, Tool: t.ID, Decision: audit.DecisionApproved,
				Reason:  "definition approved in the pin file (toolgate pins approve, or an edit of the file)",
				Details: map[string]any{"new_hash": hash, "via": "pin file"}})
		}
		wasBlocked = blockedHashes(cat)
	}
}

// blockedHashes are the tools pinning blocks, by ID, with the hash of the definition they list.
func blockedHashes(cat *upstreams.Catalog) map[string]string {
	m := map[string]string{}
	for _, ch := range cat.Changed() {
		m[ch.ID] = ch.NewHash
	}
	return m
}

// toolIDs are the canonical IDs of the catalog's tools, which a reload report decides access to.
func (g *Gateway) toolIDs() []string {
	tools := g.set.Catalog().Tools()
	ids := make([]string, len(tools))
	for i, t := range tools {
		ids[i] = t.ID
	}
	return ids
}

// reloadRecord is the audit record of one reload attempt. Details: the rules and deny lines of the
// policy in force afterwards; when the files loaded into a new policy, its deny-line count
// (deny_lines_before / deny_lines_after); and when that policy removes deny lines, the removed lines
// as "file:line: text" (they are policy, not secrets) and whether the file carried the marker that
// permits it (authz.refuse_deny_removal). A removal refused by the switch is rejected, like any
// reload that failed, with the removed lines still listed.
//
// The reload report (whenever the files loaded into a new policy, applied or refused):
// previous_version and candidate_version; lines_added and lines_removed, the lines themselves; and
// access_gained and access_lost, the principal/tool pairs (every principal either policy knows,
// every catalog tool in tools) whose access widens or narrows, each {principal, tool, before,
// after} with before and after "allowed", "denied" or "conditional" (argument conditions decide;
// see authz.Policy.Access). access_truncated is true, and the pairs left out, past
// authz.MaxReportPairs.
func reloadRecord(ev authz.ReloadEvent, tools []string) audit.Record {
	p := ev.Policy
	r := audit.Record{Kind: audit.KindPolicyReload, Decision: audit.DecisionApplied, PolicyVersion: p.Version(),
		Details: map[string]any{"rules": p.Rules(), "deny_lines": p.Denies()}}
	if ev.Candidate != nil {
		r.Details["deny_lines_before"] = ev.Previous.Denies()
		r.Details["deny_lines_after"] = ev.Candidate.Denies()
		ch := authz.Compare(ev.Previous, ev.Candidate, tools)
		r.Details["previous_version"] = ev.Previous.Version()
		r.Details["candidate_version"] = ev.Candidate.Version()
		r.Details["lines_added"] = nonNil(ch.Added)
		r.Details["lines_removed"] = nonNil(ch.Removed)
		r.Details["access_gained"] = nonNil(ch.Gained)
		r.Details["access_lost"] = nonNil(ch.Lost)
		if ch.Truncated {
			r.Details["access_truncated"] = true
		}
	}
	if len(ev.RemovedDenies) > 0 {
		r.Details["removed_deny_lines"] = ev.RemovedDenies
		r.Details["deny_removal_marker"] = ev.Marker
	}
	if ev.Err != nil {
		// The previous policy stays in force; why the new one was refused
		// (file:line of every problem) is for the operator.
		r.Decision, r.Reason = audit.DecisionRejected, ev.Err.Error()
	}
	return r
}

func approvalRecord(req approvals.Request) audit.Record {
	d := audit.DecisionApproved
	if req.State == approvals.StateDenied {
		d = audit.DecisionDenied
	}
	details := map[string]any{"id": req.ID, "requester": req.Principal, "rule": req.Rule}
	if req.RuleDigest != "" { // what the decision is bound to, beside the arguments' digest
		details["rule_digest"] = req.RuleDigest
	}
	return audit.Record{Kind: audit.KindApproval, Principal: req.DecidedBy, Tool: req.Tool, ArgsDigest: "sha256:" + req.ArgsHash,
		PolicyVersion: req.PolicyVersion, Decision: d, Reason: req.Reason, Details: details}
}

func pinRecord(ch upstreams.ChangedTool) audit.Record {
	why := "definition changed since its pin was approved"
	if ch.Pending {
		why = "new tool awaiting its first approval (pinning: strict)"
	}
	return audit.Record{Kind: audit.KindPinChange, Tool: ch.ID, Decision: audit.DecisionDenied, Reason: why,
		Details: map[string]any{"old_hash": ch.Pin.Hash, "new_hash": ch.NewHash}}
}

// nonNil writes an empty list as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
