// Package approvals keeps the calls that policy says need a human approval: a pending request per
// (principal, tool, canonical arguments, version of the a line that held it), which an approver
// approves or denies through the admin API or the console, and which the gateway consumes once when
// the agent repeats the call. A consumption whose call was then
// refused before it was sent upstream is undone (Restore), so that the approval still stands.
//
// Store is what the gateway and the admin API use. FileStore, the default, is one JSON file (see
// fileFormat), rewritten atomically on every change under an flock, so pending requests survive a restart
// and two processes sharing the file never lose each other's writes. A file was chosen over bbolt or SQLite
// because the data is small (a bounded number of records), must be readable by an operator, and needs no
// new dependency. Replicas that share a Redis (state.redis) keep their requests there instead
// (approvals/redisstore), so an approval given through one replica is consumed through any other, once.
package approvals

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/statefile"
)

// State is where a request is in its life.
type State string

// The states of a request. Pending and approved requests expire at ExpiresAt; a denied one keeps
// answering Denied until its ExpiresAt and then no longer counts.
const (
	StatePending  State = "pending"  // waiting for an approver
	StateApproved State = "approved" // the next identical call runs, once
	StateDenied   State = "denied"   // identical calls are refused until ExpiresAt
	StateUsed     State = "used"     // the approved call ran (or may have: it was sent upstream)
	StateExpired  State = "expired"  // nobody decided (or the approved call was not repeated) in time
)

var states = []State{StatePending, StateApproved, StateDenied, StateUsed, StateExpired}

// ParseState checks a state name.
func ParseState(s string) (State, error) {
	if slices.Contains(states, State(s)) {
		return State(s), nil
	}
	return "", fmt.Errorf("unknown state %q (expected pending, approved, denied, used or expired)", s)
}

// Request is one call awaiting, or having had, an approval.
type Request struct {
	ID        string          `json:"id"`        // "apr_" + 22 base64url characters (16 random bytes)
	Principal string          `json:"principal"` // who made the call
	Tool      string          `json:"tool"`      // canonical tool ID <server>/<tool>
	ArgsHash  string          `json:"args_hash"` // hex SHA-256 of the canonical arguments; opaque here
	Args      json.RawMessage `json:"args,omitempty"`
	Rule      string          `json:"rule,omitempty"` // the policy line that required approval, e.g. "policy.csv:31"
	// RuleDigest is the version of that line (authz's Policy.ApprovalDigest): the request decides
	// only calls held by a line with the same digest, and is decided only while the policy has one.
	RuleDigest string `json:"rule_digest,omitempty"`
	// PolicyVersion is the version of the whole policy the call was held under, for the record.
	PolicyVersion string `json:"policy_version,omitempty"`
	// TTL is how long the request, and then its approval or denial, lives (its rule's ttl); 0 in
	// records written before it was recorded: the store's.
	TTL       time.Duration `json:"ttl,omitempty"`
	State     State         `json:"state"`
	Reason    string        `json:"reason,omitempty"` // why it was denied (or, to OnDecision, why it was restored)
	CreatedAt time.Time     `json:"created_at"`
	DecidedAt time.Time     `json:"decided_at,omitzero"` // approved, denied, used or expired
	ExpiresAt time.Time     `json:"expires_at"`
	DecidedBy string        `json:"decided_by,omitempty"`
	// Consumption identifies the consumption that Check reported with Proceed, for Restore; empty
	// otherwise. It is not part of the record.
	Consumption string `json:"-"`
	// Created is true when Check created the request just now (so its notifications go out once,
	// from the replica that created it). It is not part of the record.
	Created bool `json:"-"`
	// Lapsed, with Created, is the last request for the same call if it expired (pending without a
	// decision, or approved and not used in time), so the agent can be told why it is asked again.
	// It is not part of the record.
	Lapsed *Request `json:"-"`
}

// Call is a held call, as the gateway asks Check about it. (Principal, Tool, ArgsHash, RuleDigest)
// is what a request is bound to: a call that differs in any of them is another request.
type Call struct {
	Principal  string
	Tool       string          // canonical tool ID <server>/<tool>
	ArgsHash   string          // hex SHA-256 of the canonical arguments
	Args       json.RawMessage // the canonical arguments, shown to approvers
	Rule       string          // the policy line that held it, "policy.csv:31"
	RuleDigest string          // that line's version (authz's Policy.ApprovalDigest)
	// PolicyVersion is the policy's version, recorded with a new request.
	PolicyVersion string
	// TTL is how long a new request, and then its decision, lives; 0: the store's ttl.
	TTL time.Duration
}

func (c *Call) request(id string, now time.Time, ttl time.Duration) Request {
	return Request{
		ID: id, Principal: c.Principal, Tool: c.Tool, ArgsHash: c.ArgsHash, Args: slices.Clone(c.Args),
		Rule: c.Rule, RuleDigest: c.RuleDigest, PolicyVersion: c.PolicyVersion, TTL: ttl,
		State: StatePending, CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

// ttlOf is how long r and its decision live: its own ttl, else def (the store's).
func ttlOf(r *Request, def time.Duration) time.Duration {
	if r.TTL > 0 {
		return r.TTL
	}
	return def
}

// Outcome is what Check tells the gateway to do with a call.
type Outcome int

// The outcomes of Check. The zero value is none of them, so an Outcome returned with an error can never
// be mistaken for Proceed.
const (
	Proceed Outcome = iota + 1 // an approval was consumed: run the call
	Pending                    // the call waits for an approver: answer approval_required
	Denied                     // an approver refused it: answer approval_denied
)

func (o Outcome) String() string {
	switch o {
	case Proceed:
		return "proceed"
	case Pending:
		return "pending"
	case Denied:
		return "denied"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Errors of Approve, Deny and List; the admin API maps ErrNotFound to 404, ErrUnavailable to 503 and the
// others to 409.
var (
	ErrNotFound   = errors.New("no such approval request")
	ErrNotPending = errors.New("approval request is not pending")
	ErrExpired    = errors.New("approval request has expired")
	ErrTooMany    = errors.New("too many pending approval requests")
	// ErrNotRestorable is Restore's refusal: the consumption is no longer the request's last (it was
	// restored already, or restored and consumed again), the approval has expired, or a newer request
	// for the same call is in force. The request stays as it is.
	ErrNotRestorable = errors.New("the approval cannot be restored")
	// ErrUnavailable wraps the failures of a store that cannot be reached right now (a shared store
	// down): nothing was decided, and the same operation may succeed later.
	ErrUnavailable = errors.New("the approvals store is unavailable")
)

// Store keeps the approval requests: FileStore, or approvals/redisstore's Store, shared by replicas.
// Implementations are safe for concurrent use.
type Store interface {
	// Check is what the gateway calls for a call that policy says needs approval:
	//   - an approved, unexpired request for exactly (principal, tool, argsHash, rule digest) is consumed (state used)
	//     and Check returns Proceed with it: the call runs once, and the next identical call needs a new
	//     approval. Consumption is atomic: however many gateways check at once, one of them gets Proceed;
	//   - a denied one still in force returns Denied with it (Reason says why);
	//   - a pending one returns Pending with it, so repeating the call does not create duplicates;
	//   - otherwise a new pending request is created (expiring after the call's TTL, else the store's)
	//     and returned with Pending and Created.
	//
	// A request held under another version of the rule (another RuleDigest) does not count: the
	// policy changed since, and the call needs a decision under the rule in force.
	// An error means nothing was decided and the call must not run.
	Check(ctx context.Context, call Call) (Outcome, Request, error)
	// Restore undoes a consumption: used is the request Check returned with Proceed, whose call was then
	// refused before anything was sent upstream. The request is approved again, with its approver and
	// expiry unchanged, so the next identical call runs without a new approval. Only that consumption
	// is undone, once: Restore fails with ErrNotRestorable, changing nothing, when the request is no
	// longer used by it, when the approval has expired, or when a newer request for the same call is in
	// force (an identical call asked for one meanwhile). It returns the approved request and reports it
	// to OnDecision with Reason saying it was restored.
	Restore(ctx context.Context, used Request) (Request, error)
	// List returns the requests in the given states (all when none is given), oldest first, with expiry
	// applied. When the store cannot be read it fails (with ErrUnavailable for a shared store that cannot
	// be reached), never answering an empty or an old list: an approver must not be told that nothing
	// waits when the gateway cannot know.
	List(states ...State) ([]Request, error)
	// Get returns the request with that id, with expiry applied, or ErrNotFound.
	Get(id string) (Request, error)
	// Approve lets the next identical call run once. Only a pending request can be approved; the approval
	// then lives for the request's ttl from now, so the agent has the whole ttl to repeat the call.
	Approve(id, by string) (Request, error)
	// Deny refuses a pending request: identical calls answer Denied with reason for the request's ttl
	// from now.
	Deny(id, by, reason string) (Request, error)
	// OnDecision registers fn (replacing any earlier one), called after each approval, denial or
	// restore made through this Store was written, with the decided request (a restored one is approved,
	// with Reason RestoredReason). The audit trail records decisions here.
	OnDecision(fn func(Request))
}

// RestoredReason is the Reason of a request that Restore reports to OnDecision.
const RestoredReason = "approval restored: the call that used it was refused before it was sent upstream"

var _ Store = (*FileStore)(nil)

// Bounds on what the file holds.
const (
	// MaxFinished is how many finished records (used, expired, denied past expiry) are kept at most.
	MaxFinished = 10000
	// FinishedRetention: finished records older than this are dropped even below MaxFinished.
	FinishedRetention = 24 * time.Hour
	// MaxActive bounds pending, approved and denied-in-force records, so an agent varying its arguments
	// cannot grow the file without end; beyond it Check fails with ErrTooMany.
	MaxActive = 10000
	// maxReason caps a deny reason, in bytes.
	maxReason = 1024
)

// FileStore is the set of approval requests of one file. It is safe for concurrent use, and several
// processes may share the file: every operation re-reads it under an exclusive file lock.
type FileStore struct {
	path string
	ttl  time.Duration
	now  func() time.Time

	mu   sync.Mutex
	reqs []Request // as last read or written, oldest first

	onDecision atomic.Pointer[func(Request)]
}

// OnDecision registers fn (replacing any earlier one), called after each approval or denial made
// through this Store was written, with the decided request. The audit trail records decisions here.
func (s *FileStore) OnDecision(fn func(Request)) { s.onDecision.Store(&fn) }

// Open reads the file at path; a missing file is an empty store. A file that is not a complete,
// consistent approvals file is an error naming it, never an empty store. ttl is how long pending and
// approved requests live; now is the clock (nil: time.Now).
func Open(path string, ttl time.Duration, now func() time.Time) (*FileStore, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("approvals: ttl must be positive, got %s", ttl)
	}
	if now == nil {
		now = time.Now
	}
	reqs, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return &FileStore{path: path, ttl: ttl, now: now, reqs: reqs}, nil
}

// Path is the file.
func (s *FileStore) Path() string { return s.path }

// TTL is how long a pending or approved request lives.
func (s *FileStore) TTL() time.Duration { return s.ttl }

// Check implements Store: it decides under the file lock. ctx is not used: the file answers at once.
func (s *FileStore) Check(_ context.Context, call Call) (Outcome, Request, error) {
	var (
		out     Outcome
		got     Request
		created bool
	)
	err := s.update(func(reqs []Request, now time.Time) ([]Request, error) {
		if i := active(reqs, call.Principal, call.Tool, call.ArgsHash, call.RuleDigest, now); i >= 0 {
			r := &reqs[i]
			switch r.State {
			case StateApproved:
				approvedAt := r.DecidedAt
				r.State, r.DecidedAt = StateUsed, now
				out = Proceed
				got = *r
				got.Consumption = fileConsumption(now, approvedAt)
				return reqs, nil
			case StateDenied:
				out = Denied
			default:
				out = Pending
			}
			got = *r
			return reqs, nil
		}
		if countActive(reqs, now) >= MaxActive {
			return nil, ErrTooMany
		}
		id, err := newID()
		if err != nil {
			return nil, err
		}
		got = call.request(id, now, cmp.Or(call.TTL, s.ttl))
		got.Lapsed = lapsed(reqs, call)
		out, created = Pending, true
		return append(reqs, got), nil
	})
	if err != nil {
		return 0, Request{}, err
	}
	got.Created = created
	return out, got, nil
}

// fileConsumption is the Consumption of a FileStore request: when it was consumed (its DecidedAt while
// used, which identifies the consumption) and when it had been approved (its DecidedAt again once
// restored), in Unix nanoseconds.
func fileConsumption(usedAt, approvedAt time.Time) string {
	return strconv.FormatInt(usedAt.UnixNano(), 10) + "/" + strconv.FormatInt(approvedAt.UnixNano(), 10)
}

// Restore implements Store under the file lock. ctx is not used: the file answers at once.
func (s *FileStore) Restore(_ context.Context, used Request) (Request, error) {
	usedAt, approvedAt, ok := strings.Cut(used.Consumption, "/")
	usedNs, err1 := strconv.ParseInt(usedAt, 10, 64)
	approvedNs, err2 := strconv.ParseInt(approvedAt, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Request{}, fmt.Errorf("%w: not a consumption reported by Check", ErrNotRestorable)
	}
	var got Request
	err := s.update(func(reqs []Request, now time.Time) ([]Request, error) {
		i := slices.IndexFunc(reqs, func(r Request) bool { return r.ID == used.ID })
		if i < 0 {
			return nil, ErrNotFound
		}
		r := &reqs[i]
		switch {
		case r.State != StateUsed || r.DecidedAt.UnixNano() != usedNs:
			return nil, fmt.Errorf("%w: it is %s, not used by that call", ErrNotRestorable, r.State)
		case !now.Before(r.ExpiresAt):
			return nil, fmt.Errorf("%w: %w", ErrNotRestorable, ErrExpired)
		case active(reqs, r.Principal, r.Tool, r.ArgsHash, r.RuleDigest, now) >= 0:
			return nil, fmt.Errorf("%w: a newer request for the same call is in force", ErrNotRestorable)
		}
		r.State, r.DecidedAt = StateApproved, time.Unix(0, approvedNs).UTC()
		got = *r
		return reqs, nil
	})
	if err != nil {
		return Request{}, err
	}
	if fn := s.onDecision.Load(); fn != nil {
		reported := got
		reported.Reason = RestoredReason
		(*fn)(reported)
	}
	return got, nil
}

// List returns the requests in the given states (all when none is given), oldest first, with expiry
// applied as of now. It reads the file again so that it sees other processes' changes; when that fails
// (the lock, or a damaged file) it fails too, rather than answer from an old copy.
func (s *FileStore) List(states ...State) ([]Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := statefile.Lock(s.path, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approvals %w", err)
	}
	reqs, err := readFile(s.path)
	unlock()
	if err != nil {
		return nil, err
	}
	s.reqs = reqs
	now := s.now()
	out := []Request{}
	for _, r := range s.reqs {
		expire(&r, now)
		if len(states) == 0 || slices.Contains(states, r.State) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Get returns the request with that id, with expiry applied, or ErrNotFound.
func (s *FileStore) Get(id string) (Request, error) {
	reqs, err := s.List()
	if err != nil {
		return Request{}, err
	}
	for _, r := range reqs {
		if r.ID == id {
			return r, nil
		}
	}
	return Request{}, ErrNotFound
}

// Approve lets the next identical call run once. Only a pending request can be approved; the approval
// then lives for the request's ttl from now, so the agent has the whole ttl to repeat the call.
func (s *FileStore) Approve(id, by string) (Request, error) {
	return s.decide(id, func(r *Request, now time.Time) {
		r.State, r.DecidedAt, r.DecidedBy, r.ExpiresAt = StateApproved, now, by, now.Add(ttlOf(r, s.ttl))
	})
}

// Deny refuses a pending request: identical calls answer Denied with reason for the request's ttl
// from now.
func (s *FileStore) Deny(id, by, reason string) (Request, error) {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return s.decide(id, func(r *Request, now time.Time) {
		r.State, r.DecidedAt, r.DecidedBy, r.Reason, r.ExpiresAt = StateDenied, now, by, reason, now.Add(ttlOf(r, s.ttl))
	})
}

func (s *FileStore) decide(id string, apply func(*Request, time.Time)) (Request, error) {
	var got Request
	err := s.update(func(reqs []Request, now time.Time) ([]Request, error) {
		i := slices.IndexFunc(reqs, func(r Request) bool { return r.ID == id })
		if i < 0 {
			return nil, ErrNotFound
		}
		switch r := &reqs[i]; r.State {
		case StatePending:
			apply(r, now)
			got = *r
			return reqs, nil
		case StateExpired:
			return nil, ErrExpired
		default:
			return nil, fmt.Errorf("%w: it is %s", ErrNotPending, r.State)
		}
	})
	if fn := s.onDecision.Load(); err == nil && fn != nil {
		(*fn)(got)
	}
	return got, err
}

// update is the one write path: under the file lock it re-reads the file, applies expiry, lets fn change
// the records, prunes, and writes the file. The in-memory copy changes only when the write succeeded, so
// a consumed approval is never reported as Proceed unless it is recorded as used.
func (s *FileStore) update(fn func(reqs []Request, now time.Time) ([]Request, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := statefile.Lock(s.path, 0o600)
	if err != nil {
		return fmt.Errorf("approvals %w", err)
	}
	defer unlock()
	reqs, err := readFile(s.path)
	if err != nil {
		return err
	}
	statefile.CleanStale(s.path)
	now := s.now()
	for i := range reqs {
		expire(&reqs[i], now)
	}
	s.reqs = slices.Clone(reqs)
	reqs, err = fn(reqs, now)
	if err != nil {
		return err
	}
	reqs = prune(reqs, now)
	data, err := encodeFile(reqs)
	if err != nil {
		return err
	}
	if err := statefile.WriteAtomic(statefile.FollowLinks(s.path), data, 0o600); err != nil {
		return fmt.Errorf("approvals file %s: %w", s.path, err)
	}
	s.reqs = reqs
	return nil
}

// expire turns a pending or approved request past its ExpiresAt into an expired one.
func expire(r *Request, now time.Time) {
	if (r.State == StatePending || r.State == StateApproved) && !now.Before(r.ExpiresAt) {
		r.State, r.DecidedAt = StateExpired, r.ExpiresAt
	}
}

// inForce reports whether a record still decides identical calls.
func inForce(r *Request, now time.Time) bool {
	switch r.State {
	case StatePending, StateApproved, StateDenied:
		return now.Before(r.ExpiresAt)
	}
	return false
}

// active is the index of the latest record in force for the call (principal, tool, arguments and
// the version of the rule that held it), or -1.
func active(reqs []Request, principal, tool, argsHash, ruleDigest string, now time.Time) int {
	for i := len(reqs) - 1; i >= 0; i-- {
		r := &reqs[i]
		if r.Principal == principal && r.Tool == tool && r.ArgsHash == argsHash && r.RuleDigest == ruleDigest && inForce(r, now) {
			return i
		}
	}
	return -1
}

// lapsed is the latest record for the call if it expired (expiry already applied), else nil.
func lapsed(reqs []Request, c Call) *Request {
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.Principal == c.Principal && r.Tool == c.Tool && r.ArgsHash == c.ArgsHash && r.RuleDigest == c.RuleDigest {
			if r.State != StateExpired {
				return nil
			}
			r.Args = nil // the new request carries them
			return &r
		}
	}
	return nil
}

func countActive(reqs []Request, now time.Time) int {
	n := 0
	for i := range reqs {
		if inForce(&reqs[i], now) {
			n++
		}
	}
	return n
}

// prune drops finished records older than FinishedRetention, then the oldest finished ones beyond
// MaxFinished. Records in force are always kept.
func prune(reqs []Request, now time.Time) []Request {
	finishedAt := func(r *Request) time.Time {
		if r.State == StateDenied {
			return r.ExpiresAt
		}
		return r.DecidedAt
	}
	out := reqs[:0]
	for i := range reqs {
		if inForce(&reqs[i], now) || now.Sub(finishedAt(&reqs[i])) < FinishedRetention {
			out = append(out, reqs[i])
		}
	}
	finished := 0
	for i := range out {
		if !inForce(&out[i], now) {
			finished++
		}
	}
	if excess := finished - MaxFinished; excess > 0 {
		kept := out[:0]
		for i := range out {
			if excess > 0 && !inForce(&out[i], now) {
				excess--
				continue
			}
			kept = append(kept, out[i])
		}
		out = kept
	}
	return out
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "apr_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
