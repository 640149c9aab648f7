package authz

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReloadStats counts reloads of a [Store], for logs, metrics and an admin endpoint.
type ReloadStats struct {
	Successes     uint64    // reloads that swapped in a new policy
	Unchanged     uint64    // reloads that found byte-identical files (nothing swapped)
	Failures      uint64    // reloads refused; the last good policy stayed in force
	LastError     string    // the last failure, "" if none yet
	LastErrorAt   time.Time // zero if none yet
	LastSuccessAt time.Time // the initial load counts
	Version       string    // the policy in force
	Rules         int       // its rule count
}

// Store is the live policy: a [Policy] that is replaced atomically on reload and never left in a
// broken state. Decisions take Current() and ask it; a decision that started before a swap
// finishes on the policy it started with, and every Current() after Reload returns sees the new
// policy (so a revoked role is denied from the next call on).
//
// # Shrinkage and truncation
//
// A policy without p lines is refused (by [LoadPolicy], so `toolgate check` refuses it too): an
// empty or fully commented-out file, or one truncated before its first rule, would deny
// everything. A policy file whose last line has no newline is refused: a file cut while being
// saved ends mid-line, and a cut can WIDEN access ("..., allow, amount <= 100" cut before
// ", amount" is an unconditional allow), which the lint alone cannot see, as the cut line is
// valid. A file that changes while it is loaded is refused as well (see [LoadPolicy]: the files
// are read again after parsing and must be byte-identical), and a reload triggered by [Store.Watch]
// waits for the files to be quiet first.
//
// What remains is a file cut exactly at a line boundary, by a writer that then stays silent
// for the debounce and the whole load: it loses its last lines. A reload that drops every deny
// line the previous policy had, or that removes more than half of its rules, is logged at Warn
// with the numbers before and after, and then applied. It is not refused by default, because
// most shrinkage removes allow lines, and refusing it would keep revoked access alive, which is
// worse than the risk it avoids. The policy file's own advice to admins is to keep deny lines at
// the top of the file, so that a file cut short at a line boundary loses permissions before it
// loses restrictions.
//
// # Deny lines removed
//
// A deny line is removed by a reload when the new policy has no p line with the same fields
// (subject, object, action, effect, condition); moving a line does not remove it, editing its
// condition does. Every reload attempt that loaded a new policy tells its [OnReloadEvent] hooks
// the deny counts before and after and the removed lines ("file:line: text" of the policy they
// were in), which the gateway writes into the reload's audit record and its metrics, and logs
// them at Warn. With [Store.RefuseDenyRemoval] on, such a reload is refused like a broken file
// (the last good policy stays, the failure is logged, counted and reported) unless the new
// policy file carries the marker line
//
//	# toolgate: allow-deny-removal <version>
//
// naming the version of the policy in force (the 12 hex digits of [Policy.Version], which the
// refusal's error names). The marker is a plain comment to the policy loader. It is one-shot by
// construction: once the reload it permits is applied, the policy in force has another version,
// so the marker no longer matches and the next reload that removes a deny line is refused again;
// it need not be removed (a stale marker permits nothing), though removing it at the next edit
// keeps the file tidy.
type Store struct {
	modelPath, policyPath string
	opts                  Options
	log                   *slog.Logger

	cur atomic.Pointer[Policy]

	mu       sync.Mutex // serialises Reload
	subs     []func(old, new *Policy)
	reloaded []func(ev ReloadEvent) // OnReload and OnReloadEvent hooks

	refuseDenyRemoval bool // see RefuseDenyRemoval; guarded by mu

	statsMu sync.Mutex
	stats   ReloadStats

	// betweenReads, when set (tests), runs between parsing the files and reading them again.
	betweenReads func()

	// Watch settings; tests replace them.
	debounce   time.Duration
	after      func(time.Duration) <-chan time.Time
	onWatching func() // called once the directories are watched
}

// defaultDebounce is how long a file must be quiet after a change before Watch reloads it.
const defaultDebounce = 250 * time.Millisecond

// NewStore loads the policy for the first time; that load must succeed.
// log may be nil (no logging).
func NewStore(modelPath, policyPath string, o Options, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		modelPath:  modelPath,
		policyPath: policyPath,
		opts:       o,
		log:        log,
		debounce:   defaultDebounce,
		after:      time.After,
	}
	p, err := s.loadScratch()
	if err != nil {
		return nil, err
	}
	s.cur.Store(p)
	s.stats.LastSuccessAt = time.Now()
	s.stats.Version, s.stats.Rules = p.Version(), p.Rules()
	log.Info("policy loaded", "model", modelPath, "policy", policyPath, "version", p.Version(), "rules", p.Rules())
	s.logWarnings(p)
	return s, nil
}

// Current is the policy in force. It is never nil.
func (s *Store) Current() *Policy {
	return s.cur.Load()
}

// Subscribe registers fn, called after each successful swap with the policy before and after
// (the gateway sends notifications/tools/list_changed from it). Subscribers run synchronously
// on the reloading goroutine, in swap order, one at a time; they must be quick and must not
// call Reload or Subscribe (that would deadlock). A panic in one is logged and does not undo the
// swap.
func (s *Store) Subscribe(fn func(old, new *Policy)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
}

// OnReload registers fn, called after every reload attempt (watch, SIGHUP, Reload) with the policy
// in force afterwards and the attempt's error (nil for a swap or byte-identical files). It runs like
// a subscriber: synchronously, quick, never calling Reload. Metrics and the audit trail use it.
func (s *Store) OnReload(fn func(p *Policy, err error)) {
	s.OnReloadEvent(func(ev ReloadEvent) { fn(ev.Policy, ev.Err) })
}

// OnReloadEvent is [Store.OnReload] with the whole attempt: what was in force before, the policy
// the files loaded into, and the deny lines it removes.
func (s *Store) OnReloadEvent(fn func(ev ReloadEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloaded = append(s.reloaded, fn)
}

// RefuseDenyRemoval turns on (or off) the refusal of reloads that remove a deny line without the
// marker the Store doc describes (config: authz.refuse_deny_removal). It applies from the next
// reload on.
func (s *Store) RefuseDenyRemoval(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseDenyRemoval = on
}

// ReloadEvent is one reload attempt, as [Store.OnReloadEvent] hooks see it.
type ReloadEvent struct {
	Policy   *Policy // in force after the attempt (never nil)
	Previous *Policy // in force before it (never nil)
	// Candidate is what the files loaded into: nil when they could not be loaded (Err says why) or
	// were byte-identical to the policy in force. When the reload was refused for removing deny
	// lines, it is the refused policy (and Policy is Previous).
	Candidate *Policy
	Err       error // nil for a swap or byte-identical files
	// RemovedDenies are Previous's deny lines that Candidate does not have, each "file:line: text"
	// in Previous's file order; nil when none were removed (or nothing was loaded).
	RemovedDenies []string
	// Marker reports that Candidate's file carried "# toolgate: allow-deny-removal <version>" for
	// Previous's version, which lets a reload that removes deny lines through RefuseDenyRemoval.
	Marker bool
}

// Applied reports whether the attempt swapped in a new policy.
func (ev ReloadEvent) Applied() bool {
	return ev.Err == nil && ev.Candidate != nil && ev.Policy == ev.Candidate
}

// DenyRemovalMarker is the policy-file comment that permits one reload removing deny lines while
// [Store.RefuseDenyRemoval] is on: "# " + DenyRemovalMarker + " " + the version in force.
const DenyRemovalMarker = "toolgate: allow-deny-removal"

// DenyRemovalError is the error of a reload refused because it removes deny lines without the marker.
type DenyRemovalError struct {
	Policy  string   // the policy file
	InForce string   // the version of the policy in force, which the marker must name
	Removed []string // the removed deny lines, "file:line: text"
	Marker  string   // what is wrong with a marker the file has, "" when it has none
}

func (e *DenyRemovalError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "authz: the reload removes %d deny line(s) and authz.refuse_deny_removal is on; refusing it (the policy in force, version %s, stays):", len(e.Removed), e.InForce)
	for _, r := range e.Removed {
		b.WriteString("\nremoved: " + r)
	}
	if e.Marker != "" {
		b.WriteString("\n" + e.Marker)
	}
	fmt.Fprintf(&b, "\nif the removal is intended, add the line \"# %s %s\" to %s and save it again", DenyRemovalMarker, e.InForce, e.Policy)
	return b.String()
}

// Stats returns a copy of the reload counters.
func (s *Store) Stats() ReloadStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// SetPrincipals makes principals the configured principals (Options.Principals) of the policy in
// force and of every later load, so that what a name is (principal or role, see [Policy.IsRole])
// follows the configuration without a restart: a new API key's principal that only p lines name
// holds those lines from the next decision on. The policy files are not read; the policy in force
// is swapped atomically for [Policy.WithPrincipals] of it, as a reload swaps: a decision that
// started before finishes on the old one. It returns the policies before and after (the same one
// when no name changed sides). Neither the subscribers nor the reload hooks are called: the
// version, the rules and the files are the same, so there is nothing to announce to other
// replicas or to audit as a policy reload; the caller tells the sessions whose tools change. A
// principal that a g line gives as a role is refused with the load error `toolgate check` would
// report, and nothing changes. Serialised with Reload.
func (s *Store) SetPrincipals(principals []string) (old, next *Policy, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old = s.cur.Load()
	next, err = old.WithPrincipals(principals)
	if err != nil {
		return old, old, err
	}
	s.opts.Principals = slices.Clone(principals)
	var nowPrincipals, nowRoles []string
	for name := range old.roleNames {
		if !next.roleNames[name] {
			nowPrincipals = append(nowPrincipals, name)
		}
	}
	for name := range next.roleNames {
		if !old.roleNames[name] {
			nowRoles = append(nowRoles, name)
		}
	}
	if len(nowPrincipals) == 0 && len(nowRoles) == 0 {
		return old, old, nil // the same roles: the policy in force answers as next would
	}
	slices.Sort(nowPrincipals)
	slices.Sort(nowRoles)
	s.cur.Store(next)
	s.log.Info("policy principals updated from the configuration", "policy", s.policyPath, "version", next.Version(),
		"now_principals", nowPrincipals, "now_roles", nowRoles)
	return old, next, nil
}

// loadScratch loads and lints both files into a fresh Policy ([LoadPolicy]'s rules, its read
// of both files twice included), never panicking.
func (s *Store) loadScratch() (*Policy, error) {
	return loadStable(s.modelPath, s.policyPath, s.opts, s.betweenReads)
}

// Reload loads and lints the files into a scratch policy (panics recovered) and, if that works,
// swaps it in atomically and notifies subscribers. On any error the
// last good policy stays in force, the error is logged at Error (with the files and every
// problem) and counted, and it is returned. Byte-identical files change nothing. See the Store
// doc for what happens when a policy shrinks. Reload is what SIGHUP should call.
func (s *Store) Reload() (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	ev := ReloadEvent{Previous: old}
	defer func() {
		ev.Policy, ev.Err = s.cur.Load(), err
		for _, fn := range s.reloaded {
			s.notifyReload(fn, ev)
		}
	}()
	next, err := s.loadScratch()
	if err != nil {
		s.fail(old, err)
		return err
	}
	if next.Version() == old.Version() {
		s.statsMu.Lock()
		s.stats.Unchanged++
		s.statsMu.Unlock()
		s.log.Info("policy unchanged", "policy", s.policyPath, "version", old.Version())
		return nil
	}
	ev.Candidate = next
	ev.RemovedDenies = removedDenies(old, next)
	if len(ev.RemovedDenies) > 0 {
		var markerProblem string
		ev.Marker, markerProblem, err = s.hasMarker(next, old.Version())
		if err != nil {
			s.fail(old, err)
			return err
		}
		if s.refuseDenyRemoval && !ev.Marker {
			err = &DenyRemovalError{Policy: s.policyPath, InForce: old.Version(), Removed: ev.RemovedDenies, Marker: markerProblem}
			s.fail(old, err)
			return err
		}
	}
	s.warnShrinkage(old, next, ev)
	s.cur.Store(next)

	s.statsMu.Lock()
	s.stats.Successes++
	s.stats.LastSuccessAt = time.Now()
	s.stats.Version, s.stats.Rules = next.Version(), next.Rules()
	s.statsMu.Unlock()
	s.log.Info("policy reloaded", "model", s.modelPath, "policy", s.policyPath,
		"version", next.Version(), "previous", old.Version(), "rules", next.Rules())
	s.logWarnings(next)

	for _, fn := range s.subs {
		s.notify(fn, old, next)
	}
	return nil
}

func (s *Store) notifyReload(fn func(ev ReloadEvent), ev ReloadEvent) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("policy reload hook panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn(ev)
}

// removedDenies are old's deny lines that next has no line for (same fields), "file:line: text".
func removedDenies(old, next *Policy) []string {
	var out []string
	for _, r := range old.prules {
		if r.eft != effectDeny {
			continue
		}
		if nr, ok := next.byKey[ruleKey(r.ptype, r.fields)]; ok && nr.ptype == "p" && nr.eft == effectDeny {
			continue
		}
		out = append(out, old.ref(r)+": "+r.text)
	}
	return out
}

// hasMarker reports whether next's policy file carries the deny-removal marker for version inForce.
// It reads the files again, and only trusts them if they are the bytes next was loaded from (same
// version); otherwise the files changed since the load, and the reload is refused as any file
// that changes while it is read. problem describes a marker line that is present but does not
// permit this reload.
func (s *Store) hasMarker(next *Policy, inForce string) (ok bool, problem string, err error) {
	modelText, policyText, err := readBoth(s.modelPath, s.policyPath)
	if err != nil {
		return false, "", err
	}
	if contentVersion(modelText, policyText) != next.Version() {
		return false, "", &LoadErrors{Problems: []*LoadError{{File: s.policyPath,
			Reason: fmt.Sprintf("%s or %s changed while being read (a save in progress?); write the files completely, then reload", s.modelPath, s.policyPath)}}}
	}
	for _, line := range strings.Split(string(policyText), "\n") {
		line = strings.TrimSpace(line)
		rest, isComment := strings.CutPrefix(line, "#")
		if !isComment {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 || f[0]+" "+f[1] != DenyRemovalMarker {
			continue
		}
		switch {
		case len(f) == 3 && f[2] == inForce:
			return true, "", nil
		case len(f) == 3:
			problem = fmt.Sprintf("the file's marker %q names version %s, but the policy in force is version %s (a marker permits one reload only)", line, f[2], inForce)
		default:
			problem = fmt.Sprintf("the file's marker %q must name the version of the policy in force", line)
		}
	}
	return false, problem, nil
}

func (s *Store) notify(fn func(old, new *Policy), old, next *Policy) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("policy subscriber panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn(old, next)
}

func (s *Store) fail(old *Policy, err error) {
	s.statsMu.Lock()
	s.stats.Failures++
	s.stats.LastError = err.Error()
	s.stats.LastErrorAt = time.Now()
	failures := s.stats.Failures
	s.statsMu.Unlock()
	s.log.Error("policy reload refused; the last good policy stays in force",
		"model", s.modelPath, "policy", s.policyPath,
		"problems", problemLines(err), "in_force", old.Version(), "failures", failures)
}

// problemLines splits an error into its problems, for a structured log attribute.
func problemLines(err error) []string {
	var le *LoadErrors
	if errors.As(err, &le) {
		out := make([]string, len(le.Problems))
		for i, p := range le.Problems {
			out[i] = p.Error()
		}
		return out
	}
	return strings.Split(err.Error(), "\n")
}

func (s *Store) warnShrinkage(old, next *Policy, ev ReloadEvent) {
	if old.Denies() > 0 && next.Denies() == 0 {
		s.log.Warn("policy reload removes every deny line; applying it (check the file was not cut short)",
			"policy", s.policyPath, "deny_lines_before", old.Denies(), "deny_lines_after", 0,
			"rules_before", old.Rules(), "rules_after", next.Rules())
	}
	if len(ev.RemovedDenies) > 0 {
		s.log.Warn("policy reload removes deny lines; applying it",
			"policy", s.policyPath, "removed", ev.RemovedDenies, "marker", ev.Marker,
			"deny_lines_before", old.Denies(), "deny_lines_after", next.Denies())
	}
	if next.Rules()*2 < old.Rules() {
		s.log.Warn("policy reload removes more than half of the rules; applying it (check the file was not cut short)",
			"policy", s.policyPath, "rules_before", old.Rules(), "rules_after", next.Rules())
	}
}

func (s *Store) logWarnings(p *Policy) {
	for _, w := range p.Warnings() {
		s.log.Warn("policy line probably not what was meant", "problem", w)
	}
}

// Decide decides on the current policy: a call is always judged by the
// policy in force when it is checked, so a revoked role is denied from the
// first call after the swap.
func (s *Store) Decide(req Request) Decision { return s.Current().Decide(req) }

// Visible answers on the current policy.
func (s *Store) Visible(sub Subject, obj string) bool { return s.Current().Visible(sub, obj) }

// VisibleAct answers Policy.VisibleAct on the current policy.
func (s *Store) VisibleAct(sub Subject, obj, act string) bool {
	return s.Current().VisibleAct(sub, obj, act)
}
