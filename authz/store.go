package authz

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
// with the numbers before and after, and then applied. It is not refused, because (1) most
// shrinkage removes allow lines, and refusing it would keep revoked access alive, which is
// worse than the risk it avoids; (2) a file watch has no "yes, I mean it" channel, so a refusal
// would force a restart for every deliberate cleanup. The policy file's own advice to admins is
// to keep deny lines at the top of the file, so that a file cut short at a line boundary loses
// permissions before it loses restrictions.
type Store struct {
	modelPath, policyPath string
	opts                  Options
	log                   *slog.Logger

	cur atomic.Pointer[Policy]

	mu       sync.Mutex // serialises Reload
	subs     []func(old, new *Policy)
	reloaded []func(p *Policy, err error) // OnReload hooks

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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloaded = append(s.reloaded, fn)
}

// Stats returns a copy of the reload counters.
func (s *Store) Stats() ReloadStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
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
	defer func() {
		for _, fn := range s.reloaded {
			s.notifyReload(fn, err)
		}
	}()
	old := s.cur.Load()
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
	s.warnShrinkage(old, next)
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

func (s *Store) notifyReload(fn func(p *Policy, err error), err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("policy reload hook panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn(s.cur.Load(), err)
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

func (s *Store) warnShrinkage(old, next *Policy) {
	if old.Denies() > 0 && next.Denies() == 0 {
		s.log.Warn("policy reload removes every deny line; applying it (check the file was not cut short)",
			"policy", s.policyPath, "deny_lines_before", old.Denies(), "deny_lines_after", 0,
			"rules_before", old.Rules(), "rules_after", next.Rules())
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
