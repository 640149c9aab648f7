// Package replay answers, for `toolgate policy diff`, the question to ask before a policy reload:
// which of the calls the gateway actually decided would this candidate policy decide otherwise?
// It replays every tools/call record of the audit trail through the policy in force and through
// the candidate, and reports the calls whose decision (allow, deny, approval) differs, grouped
// by principal and tool, with the line that decides each way.
//
// [Shadow], for `toolgate policy diff --shadow`, decides nothing again: it reads the disagreements a
// running shadow policy (authz.shadow_policy) wrote on the call records, grouped the same way.
//
// # Why a package of its own
//
// The gateway never replays anything: this is policy tooling, like authz/explain and
// authz/policytest, so it lives beside package authz and uses only its exported decisions
// ([authz.Policy.Decide], [authz.Policy.ApprovalRule], [authz.Policy.Trace]) and the audit
// package's reader. It takes no configuration: the command hands it both policies, the
// attributes API keys give their principals, and the trail's files.
//
// # What the trail holds, and what is never guessed
//
// A call record keeps the principal, the canonical tool, the decision and a digest of the
// arguments; the arguments themselves only with audit.include_args (redacted by audit.redact).
// It does not keep the roles a JWT granted, nor its attributes. So:
//
//   - A decision no argument condition can change ([authz.Policy.ArgsMatter] is false) is replayed
//     from the principal and tool alone, once per principal and tool (memoized): most calls.
//   - A decision a condition on the arguments can change is replayed with the recorded
//     arguments when the trail has them whole: their digest must equal the recorded digest of
//     what the caller sent, which a redacted field breaks.
//   - Otherwise, when both policies match the same lines (same text, same conditions, same
//     roles) for that principal and tool, no arguments can make them disagree: unchanged.
//   - Anything else is "unknown", counted and listed by principal and tool, never decided.
//
// A principal the configuration does not name (no API key, not stdio, not anonymous) had its
// rights from a token: it is replayed with its g lines only, and its groups are flagged.
//
// # Cost
//
// The trail is streamed ([audit.ReadFiles]): one record in memory at a time, whatever its size.
// Memory grows with the number of distinct (principal, tool) pairs and of changed groups, both
// bounded by what the trail names, not by its length.
package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
)

// The decisions an outcome may have.
const (
	Allow    = "allow"
	Deny     = "deny"
	Approval = "approval" // allowed, but an a line makes it wait for a human approval
	Unknown  = "unknown"  // a condition reads arguments the trail does not have
)

// Options configure a replay.
type Options struct {
	Current   *authz.Policy // the policy in force
	Candidate *authz.Policy // the policy to compare with it
	// Attributes are each principal's API-key attributes (conditions read them as principal.<name>).
	Attributes map[string]map[string]string
	// Configured are the principals the configuration names (API keys, stdio, anonymous); any
	// other principal's calls came with a token, whose roles and attributes the trail does not keep.
	Configured []string
	// Since and Until bound the records replayed by their time, [Since, Until); zero means open.
	Since, Until time.Time
}

// Outcome is one policy's answer to one call.
type Outcome struct {
	Decision string `json:"decision"` // allow, deny, approval or unknown
	// Rule is the line that decides, "file:line": the first applying deny, else the first
	// applying allow; for an approval, the a line. "" when no line applies (denied by default).
	Rule string `json:"rule,omitempty"`
}

func (o Outcome) String() string {
	switch {
	case o.Decision == Unknown:
		return "unknown"
	case o.Rule == "":
		return o.Decision + " (no line: denied by default)"
	}
	return o.Decision + " by " + o.Rule
}

// Change is a group of calls whose decision the candidate changes: one principal, one tool, one
// pair of outcomes.
type Change struct {
	Principal string    `json:"principal"`
	Tool      string    `json:"tool"`
	Now       Outcome   `json:"now"`
	After     Outcome   `json:"after"`
	Calls     int       `json:"calls"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
	Example   string    `json:"example"` // file:line of the first such record
	// TokenSubject: the principal is not in the configuration, so its rights came from a token
	// whose roles and attributes the trail does not keep; replayed with g lines only.
	TokenSubject bool `json:"token_subject,omitempty"`
}

// UnknownGroup counts the calls of one principal and tool that could not be replayed.
type UnknownGroup struct {
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Calls     int    `json:"calls"`
	Why       string `json:"why"`
}

// Report is what a replay found.
type Report struct {
	CurrentVersion   string `json:"current_version"`
	CandidateVersion string `json:"candidate_version"`
	Files            int    `json:"files"`
	Records          int    `json:"records"`        // lines read, every kind
	Calls            int    `json:"calls"`          // tools/call records replayed
	Unresolved       int    `json:"unresolved"`     // call records without a tool (tool_not_found): nothing to decide
	OutsideWindow    int    `json:"outside_window"` // call records before Since or from Until on
	Changed          int    `json:"changed"`        // calls whose decision changes
	Unchanged        int    `json:"unchanged"`
	Unknown          int    `json:"unknown"` // calls that could not be replayed
	// Decided counts policy decisions made (each call is decided by both policies unless both
	// answers were memoized): the measure of a replay's work.
	Decided  int            `json:"decided"`
	Memoized int            `json:"memoized"` // calls answered from the (principal, tool) memo
	Changes  []Change       `json:"changes"`
	Unknowns []UnknownGroup `json:"unknowns"`
}

// Empty reports whether no call changes and none was unknown.
func (r *Report) Empty() bool { return r.Changed == 0 && r.Unknown == 0 }

// maxPairs bounds the (principal, tool) memo; past it, pairs are worked out per call.
const maxPairs = 1 << 16

// maxArgMemo bounds the memo of decisions on recorded arguments.
const maxArgMemo = 1 << 16

// Replayer replays records one at a time; [Run] drives it over a trail's files.
type Replayer struct {
	o        Options
	rep      Report
	pairs    map[string]*pair
	argMemo  map[string][2]Outcome
	changes  map[changeKey]*Change
	unknowns map[string]*UnknownGroup
}

type changeKey struct {
	principal, tool string
	now, after      Outcome
}

// pair is what is known of one principal and tool, whatever the arguments.
type pair struct {
	sub      authz.Subject
	token    bool
	fixed    [2]*Outcome // per policy: the outcome when no condition reads the arguments
	sameSig  bool        // both policies match the same lines: they agree on every arguments
	sigKnown bool
}

// New starts a replay.
func New(o Options) *Replayer {
	return &Replayer{
		o:        o,
		rep:      Report{CurrentVersion: o.Current.Version(), CandidateVersion: o.Candidate.Version()},
		pairs:    map[string]*pair{},
		argMemo:  map[string][2]Outcome{},
		changes:  map[changeKey]*Change{},
		unknowns: map[string]*UnknownGroup{},
	}
}

// Run replays every record of the given trails (each a list of files, oldest first, as
// [audit.TrailFiles] gives them). Reading and decoding the lines, most of a replay's cost when
// decisions are memoized, runs on its own goroutine, a batch of records ahead of the decisions.
func Run(o Options, trails [][]string) (*Report, error) {
	r := New(o)
	batches := make(chan []positioned, 4)
	errc := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(batches)
		errc <- readAhead(trails, batches, done)
	}()
	for b := range batches {
		for i := range b {
			if err := r.Add(&b[i].rec, b[i].at); err != nil {
				return nil, err
			}
		}
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	for _, files := range trails {
		r.rep.Files += len(files)
	}
	return r.Report(), nil
}

// positioned is a record read ahead, with where it was read.
type positioned struct {
	rec audit.Record
	at  audit.Position
}

// batchSize is how many records readAhead hands over at a time.
const batchSize = 512

// readAhead reads the trails into batches until done is closed. A record's slices and maps are
// fresh for each line (audit.ReadFiles reuses only the struct), so a copy of the struct is the
// record's own.
func readAhead(trails [][]string, out chan<- []positioned, done <-chan struct{}) error {
	batch := make([]positioned, 0, batchSize)
	flush := func() bool {
		select {
		case out <- batch:
			batch = make([]positioned, 0, batchSize)
			return true
		case <-done:
			return false
		}
	}
	for _, files := range trails {
		err := audit.ReadFiles(files, func(rec *audit.Record, at audit.Position) error {
			batch = append(batch, positioned{rec: *rec, at: at})
			if len(batch) == batchSize && !flush() {
				return audit.ErrStop
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return nil
}

// Add replays one record (of any kind: only tools/call records are decided).
func (r *Replayer) Add(rec *audit.Record, at audit.Position) error {
	r.rep.Records++
	if rec.Kind != audit.KindCall {
		return nil
	}
	if rec.Tool == "" {
		r.rep.Unresolved++
		return nil
	}
	if (!r.o.Since.IsZero() && rec.Time.Before(r.o.Since)) || (!r.o.Until.IsZero() && !rec.Time.Before(r.o.Until)) {
		r.rep.OutsideWindow++
		return nil
	}
	r.rep.Calls++
	p := r.pair(rec.Principal, rec.Tool)
	var now, after Outcome
	switch {
	case p.fixed[0] != nil && p.fixed[1] != nil:
		r.rep.Memoized++
		now, after = *p.fixed[0], *p.fixed[1]
	case r.same(p):
		r.rep.Unchanged++
		return nil
	default:
		args, ok := wholeArgs(rec)
		if !ok {
			r.unknown(rec, p)
			return nil
		}
		now, after = r.withArgs(p, rec, args)
	}
	if now.Decision == after.Decision {
		r.rep.Unchanged++
		return nil
	}
	r.rep.Changed++
	k := changeKey{principal: rec.Principal, tool: rec.Tool, now: now, after: after}
	c := r.changes[k]
	if c == nil {
		c = &Change{Principal: rec.Principal, Tool: rec.Tool, Now: now, After: after, First: rec.Time, Example: at.String(), TokenSubject: p.token}
		r.changes[k] = c
	}
	c.Calls++
	if rec.Time.After(c.Last) {
		c.Last = rec.Time
	}
	if rec.Time.Before(c.First) {
		c.First = rec.Time
	}
	return nil
}

// pair is the memo entry for principal and tool, made on first sight.
func (r *Replayer) pair(principal, tool string) *pair {
	key := principal + "\x00" + tool
	if p := r.pairs[key]; p != nil {
		return p
	}
	p := &pair{sub: authz.Subject{Principal: principal, Attrs: r.o.Attributes[principal]}, token: !slices.Contains(r.o.Configured, principal)}
	for i, pol := range r.policies() {
		if !pol.ArgsMatter(p.sub, tool, authz.ActCall) {
			o := r.decide(pol, authz.Request{Subject: p.sub, Object: tool, Action: authz.ActCall})
			p.fixed[i] = &o
		}
	}
	if len(r.pairs) < maxPairs {
		r.pairs[key] = p
	}
	// Computed on first need only (same), with the tool in hand.
	p.sig(r, tool)
	return p
}

func (r *Replayer) policies() [2]*authz.Policy { return [2]*authz.Policy{r.o.Current, r.o.Candidate} }

// sig works out whether both policies match the same lines for the pair (only needed when a
// condition reads the arguments).
func (p *pair) sig(r *Replayer, tool string) {
	if p.fixed[0] != nil && p.fixed[1] != nil {
		return
	}
	req := authz.Request{Subject: p.sub, Object: tool, Action: authz.ActCall}
	a, errA := signature(r.o.Current, req)
	b, errB := signature(r.o.Candidate, req)
	p.sigKnown = true
	p.sameSig = errA == nil && errB == nil && a == b
}

func (r *Replayer) same(p *pair) bool { return p.sigKnown && p.sameSig }

// signature is what decides a request under p, arguments aside: the roles the decision uses (a
// condition may read principal.roles) and the text of every p and a line whose subject, object
// and action match, sorted (a p line's place in the file does not change the decision). Two
// policies with the same signature for a request decide it the same for every arguments.
func signature(p *authz.Policy, req authz.Request) (string, error) {
	t, err := p.Trace(req)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range t.Lines {
		lines = append(lines, l.Text)
	}
	slices.Sort(lines)
	var b strings.Builder
	b.WriteString(strings.Join(t.Roles, ","))
	b.WriteString("\x00")
	b.WriteString(strings.Join(lines, "\x01"))
	b.WriteString("\x00")
	for _, l := range t.ApprovalLines { // in file order: the first that applies is named
		b.WriteString(l.Text + "\x01")
	}
	return b.String(), nil
}

// wholeArgs are the record's arguments when the trail kept them whole: written
// (audit.include_args) and with the digest of what the caller sent (no field redacted).
func wholeArgs(rec *audit.Record) (json.RawMessage, bool) {
	if len(rec.Args) == 0 || rec.ArgsDigest == "" {
		return nil, false
	}
	if audit.Digest(rec.Args) != rec.ArgsDigest {
		return nil, false
	}
	return rec.Args, true
}

// withArgs decides the record's call under both policies with its arguments, memoized by digest.
func (r *Replayer) withArgs(p *pair, rec *audit.Record, args json.RawMessage) (now, after Outcome) {
	key := rec.Principal + "\x00" + rec.Tool + "\x00" + rec.ArgsDigest
	if v, ok := r.argMemo[key]; ok {
		return v[0], v[1]
	}
	var out [2]Outcome
	for i, pol := range r.policies() {
		if p.fixed[i] != nil {
			out[i] = *p.fixed[i]
			continue
		}
		out[i] = r.decide(pol, authz.Request{Subject: p.sub, Object: rec.Tool, Action: authz.ActCall, Args: args})
	}
	if len(r.argMemo) < maxArgMemo {
		r.argMemo[key] = out
	}
	return out[0], out[1]
}

// decide is the gateway's answer: Decide, then for an allowed call ApprovalRule.
func (r *Replayer) decide(pol *authz.Policy, req authz.Request) Outcome {
	r.rep.Decided++
	d := pol.Decide(req)
	if !d.Allowed {
		return Outcome{Decision: Deny, Rule: d.Rule}
	}
	if rule, needed := pol.ApprovalRule(req); needed {
		return Outcome{Decision: Approval, Rule: rule}
	}
	return Outcome{Decision: Allow, Rule: d.Rule}
}

func (r *Replayer) unknown(rec *audit.Record, p *pair) {
	r.rep.Unknown++
	key := rec.Principal + "\x00" + rec.Tool
	g := r.unknowns[key]
	if g == nil {
		why := "a condition reads the arguments, and the trail keeps only their digest (audit.include_args is off)"
		if len(rec.Args) > 0 {
			why = "a condition reads the arguments, and the trail's copy is not whole (audit.redact removed a field, or they were not JSON)"
		}
		g = &UnknownGroup{Principal: rec.Principal, Tool: rec.Tool, Why: why}
		r.unknowns[key] = g
	}
	g.Calls++
}

// Report is the replay so far, its groups sorted by principal, tool and count.
func (r *Replayer) Report() *Report {
	rep := r.rep
	rep.Changes = make([]Change, 0, len(r.changes))
	for _, c := range r.changes {
		rep.Changes = append(rep.Changes, *c)
	}
	slices.SortFunc(rep.Changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Tool, b.Tool), cmp.Compare(b.Calls, a.Calls),
			cmp.Compare(a.Now.String(), b.Now.String()), cmp.Compare(a.After.String(), b.After.String()))
	})
	rep.Unknowns = make([]UnknownGroup, 0, len(r.unknowns))
	for _, u := range r.unknowns {
		rep.Unknowns = append(rep.Unknowns, *u)
	}
	slices.SortFunc(rep.Unknowns, func(a, b UnknownGroup) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Tool, b.Tool))
	})
	return &rep
}

// Summary is the report's one-line count.
func (r *Report) Summary() string {
	return fmt.Sprintf("%d call(s) replayed from %d record(s) in %d file(s): %d would change, %d unchanged, %d unknown",
		r.Calls, r.Records, r.Files, r.Changed, r.Unchanged, r.Unknown)
}
