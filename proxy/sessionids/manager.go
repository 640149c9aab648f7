package sessionids

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/server"
)

// Prefix starts every session id, as mcp-go's own managers write it, so
// that replicas running mcp-go's default manager, and clients and tests
// that look at the ids, see the same ids as before.
const Prefix = "mcp-session-"

// MinRetention is the shortest time a terminated id is refused: the
// shortest idle TTL the config accepts (listen.session_idle_ttl, 1m..24h),
// for callers that pass none.
const MinRetention = time.Minute

// DefaultMaxIDs bounds each of the manager's three sets (terminated ids,
// ids known not to be, and the owners of ids minted here). An entry costs
// about 250 bytes (a 48-byte id, its map slot, list element and entry), so
// a full set is about 25 MB. 100,000 terminations within one idle TTL (30
// minutes by default) is 55 DELETEs a second for half an hour, far beyond
// clients that end a session once; 100,000 ids known, or minted, is as many
// sessions active on one replica within an idle TTL. Past the bound the
// oldest entry goes first: a terminated id forgotten that way is accepted
// again as any unknown id is (with a shared store it is looked up there,
// where it is still recorded, and refused again); a known id forgotten
// costs one more lookup, and a minted one's owner is read from the shared
// store on a DELETE (without one, the DELETE ends the session here only).
const DefaultMaxIDs = 100_000

// ErrInvalid is the error of an id that is not a session id at all: mcp-go
// answers it 404 "Invalid session ID".
var ErrInvalid = errors.New("invalid session id")

// Shared is the store the replicas share terminations and the owners of
// sessions through (proxy/sessionids/redisstore).
type Shared interface {
	// Follow hands heard every id a replica (this one included) announced
	// as terminated, and calls missed when announcements may have been
	// lost (the subscription was down and is back). Both are called from a
	// goroutine of the store's, and must not block. stop ends it.
	Follow(heard func(id string), missed func()) (stop func())
	// Announce records id as terminated for ttl, for every replica, and
	// tells them. It never blocks: the store sends it in the background,
	// and keeps it while the store is down.
	Announce(id string, ttl time.Duration)
	// Lookup asks, in one round trip, whether a replica terminated id, and
	// which principal opened it ("" when no replica recorded one, or its
	// record expired). An error means the store could not tell; the store
	// counts it.
	Lookup(ctx context.Context, id string) (terminated bool, owner string, err error)
	// Claim records principal as the owner of the session id for ttl, for
	// every replica. Like Announce, it never blocks.
	Claim(id, principal string, ttl time.Duration)
	// Owner asks which principal opened id: found is false when no replica
	// recorded one (or its record expired). An error means the store could
	// not tell; the store counts it.
	Owner(ctx context.Context, id string) (principal string, found bool, err error)
}

// Options configure a Manager.
type Options struct {
	// IdleTTL is the session idle TTL (listen.session_idle_ttl): how long a
	// terminated id is refused (at least MinRetention). For that long after
	// its last request, a session that was not terminated may still be
	// alive somewhere (its listening stream, log level, subscriptions and
	// buffered events on some replica); after it, such a session would have
	// been dropped as idle anyway, and a request naming it is served as a
	// new, empty session, which is all a forgotten terminated id gets too.
	IdleTTL time.Duration
	Shared  Shared       // nil: terminations stay on this replica
	Log     *slog.Logger // nil: no logs
	// Principal is who a request was authenticated as, from its context:
	// the owner recorded for a session minted for it, and the requester
	// whose DELETE MayEnd judges. nil: nobody, so no session has an owner
	// and no DELETE ends one beyond mcp-go's own state (see MayEnd).
	Principal func(context.Context) string
	// Now and MaxIDs are for tests: nil is time.Now, 0 DefaultMaxIDs.
	Now    func() time.Time
	MaxIDs int
}

// Manager is a server.SessionIdManager that accepts any well-formed id
// except those of terminated sessions (see the package comment). Pass its
// Resolver to mcp-go (server.WithSessionIdManagerResolver) and wrap the
// endpoint in its Guard.
type Manager struct {
	shared    Shared
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	principal func(context.Context) string
	stop      func()

	mu         sync.Mutex
	terminated *idSet // ids terminated, until their retention ends
	known      *idSet // with a shared store: ids seen not terminated there (or minted here)
	minted     *idSet // ids minted here for a principal (owner), until their record in the store expires
	epoch      uint64 // counts missed(): a lookup started before one must not mark its id known
	lookups    map[string]*lookup
	failing    bool // the last lookup failed (and was logged)
	ownerDown  bool // the last lookup of an owner failed (and was logged)
}

// lookup is one question to the shared store, which concurrent requests
// naming the same unknown id wait for rather than each asking.
type lookup struct {
	done       chan struct{}
	terminated bool
	owner      string
}

// New returns a manager; with a shared store it follows the other
// replicas' terminations until Close.
func New(o Options) *Manager {
	m := &Manager{shared: o.Shared, log: o.Log, now: o.Now, retention: max(o.IdleTTL, MinRetention),
		principal: o.Principal, lookups: map[string]*lookup{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	limit := o.MaxIDs
	if limit <= 0 {
		limit = DefaultMaxIDs
	}
	m.terminated, m.known, m.minted = newIDSet(limit), newIDSet(limit), newIDSet(limit)
	if m.shared != nil {
		m.stop = m.shared.Follow(m.heard, m.missed)
	}
	return m
}

// Close stops following the other replicas' terminations.
func (m *Manager) Close() {
	if m.stop != nil {
		m.stop()
	}
}

// Retention is how long a terminated id is refused.
func (m *Manager) Retention() time.Duration { return m.retention }

// Generate mints a new id: Prefix and a random UUID, as mcp-go does. It
// records no owner: mcp-go mints through the Resolver, which does.
func (m *Manager) Generate() string { return m.mint("", false) }

// mint is Generate; with owned, principal is recorded as the session's
// owner, here and (in the background) in the shared store.
func (m *Manager) mint(principal string, owned bool) string {
	id := Prefix + uuid.NewString()
	if m.shared == nil && !owned {
		return id
	}
	m.mu.Lock()
	now := m.now()
	if m.shared != nil {
		m.known.add(id, time.Time{}, now)
		if e := m.known.get(id, now); e != nil && owned {
			e.owner = principal
		}
	}
	if owned {
		m.minted.add(id, now.Add(m.ownerTTL()), now)
		if e := m.minted.get(id, now); e != nil {
			e.owner, e.claimed = principal, now
		}
	}
	m.mu.Unlock()
	if owned && m.shared != nil {
		m.shared.Claim(id, principal, m.ownerTTL())
	}
	return id
}

// ownerTTL is how long a session's owner is kept, here and in the shared
// store, after it was last recorded: the idle TTL and the refresh period
// (half of it). A session's owner is recorded again (touch) on its first
// request at least half an idle TTL after the last record, so the record
// outlives the session's last request by at least the idle TTL, which is
// when mcp-go drops the session as idle.
func (m *Manager) ownerTTL() time.Duration { return m.retention + m.retention/2 }

// touch keeps the owner of a session minted here that is still in use: in
// memory, and again in the shared store, in the background, once per half
// idle TTL: one write per active session every 15 minutes by default,
// never on the request's path (a write per request would be a round trip
// per request, and an expiry refreshed only on DELETE would lapse under a
// session busy for longer than the TTL). A session in use only on other
// replicas is not recorded again by them (they do not know its owner
// without asking); its record expires 1.5 idle TTLs after its last request
// here.
func (m *Manager) touch(id string) {
	m.mu.Lock()
	now := m.now()
	e := m.minted.get(id, now)
	if e == nil || now.Sub(e.claimed) < m.retention/2 {
		m.mu.Unlock()
		return
	}
	e.claimed = now
	m.minted.extend(id, now.Add(m.ownerTTL()))
	owner := e.owner
	m.mu.Unlock()
	if m.shared != nil {
		m.shared.Claim(id, owner, m.ownerTTL())
	}
}

// Ending is what a client's DELETE of a session may do, as MayEnd judged
// it.
type Ending int

const (
	// EndLocally: the requester could not be shown to own the session (no
	// replica recorded an owner, or the store could not be asked). mcp-go
	// drops what this replica holds for the session, as it did before this
	// package; the id is not refused, here or anywhere, and nothing is
	// written to the store or announced.
	EndLocally Ending = iota
	// EndEverywhere: the requester opened the session. It is refused from
	// now on, here and on every replica (Terminate).
	EndEverywhere
	// NotOwner: another principal opened the session. The DELETE is
	// answered 404, as a request naming an unknown session, and ends
	// nothing.
	NotOwner
)

type endingKey struct{}

// MayEnd judges a client's DELETE of id, the requester being the
// principal of ctx (Options.Principal), and returns ctx carrying the
// verdict, which the Resolver reads when mcp-go ends the session: only a
// request whose context says EndEverywhere terminates it for every
// replica. NotOwner must be answered 404 without going on. The owner is
// the one this replica recorded when it minted the id, or else the one the
// shared store holds (one lookup, only for a DELETE of a session minted
// elsewhere).
func (m *Manager) MayEnd(ctx context.Context, id string) (context.Context, Ending) {
	e := m.ending(ctx, id)
	return context.WithValue(ctx, endingKey{}, e), e
}

func (m *Manager) ending(ctx context.Context, id string) Ending {
	if !WellFormed(id) || m.principal == nil {
		return EndLocally
	}
	requester := m.principal(ctx)
	m.mu.Lock()
	if e := m.minted.get(id, m.now()); e != nil {
		owner := e.owner
		m.mu.Unlock()
		return judge(owner, requester)
	}
	m.mu.Unlock()
	if m.shared == nil {
		return EndLocally
	}
	owner, found, err := m.shared.Owner(ctx, id)
	m.mu.Lock()
	wasDown := m.ownerDown
	m.ownerDown = err != nil
	m.mu.Unlock()
	switch {
	case err != nil && !wasDown:
		m.log.Warn("cannot ask the shared state store who opened a session; a DELETE of a session opened on another replica ends it on this replica only until the store answers", "err", err)
	case err == nil && wasDown:
		m.log.Info("asking the shared state store who opened a session again")
	}
	if err != nil || !found {
		return EndLocally
	}
	return judge(owner, requester)
}

func judge(owner, requester string) Ending {
	if owner == requester {
		return EndEverywhere
	}
	return NotOwner
}

// mayUse reports whether the principal of ctx may use session id here:
// false only when its owner is known, and is someone else. The owner is
// known on the replica that minted the id, and on any other from the
// lookup it makes of an id it has not seen (Validate): the store answers
// both questions in one round trip, and the answer is kept with the id.
// Without that, a GET naming another principal's session on a replica that
// did not open it registered the session there for the requester: the
// owner's own requests on that replica were then refused, and the
// requester got its listening stream. An owner nobody recorded (the store
// was down, or the record expired with the session) refuses no one.
func (m *Manager) mayUse(ctx context.Context, id string) bool {
	if m.principal == nil {
		return true
	}
	m.mu.Lock()
	now := m.now()
	owner := ""
	if e := m.minted.get(id, now); e != nil {
		owner = e.owner
	} else if e := m.known.get(id, now); e != nil {
		owner = e.owner
	}
	m.mu.Unlock()
	return owner == "" || owner == m.principal(ctx)
}

// Validate reports an id that is not well formed as an error (404 Invalid
// session ID), and one that was terminated as isTerminated (404 Session
// terminated); any other id is accepted. It waits on the shared store only
// for an id it has not seen before, once, and never refuses because the
// store failed.
func (m *Manager) Validate(id string) (isTerminated bool, err error) {
	if !WellFormed(id) {
		return false, ErrInvalid
	}
	m.mu.Lock()
	now := m.now()
	if m.terminated.has(id, now) {
		m.mu.Unlock()
		return true, nil
	}
	if m.shared == nil || m.known.has(id, now) {
		m.mu.Unlock()
		return false, nil
	}
	l, asked := m.lookups[id]
	if asked {
		m.mu.Unlock()
		<-l.done
		return l.terminated, nil
	}
	l = &lookup{done: make(chan struct{})}
	m.lookups[id] = l
	epoch := m.epoch
	m.mu.Unlock()
	m.ask(id, l, epoch)
	return l.terminated, nil
}

// ask looks id up in the shared store and keeps the answer. A failure is
// kept nowhere: the request is let through (the package comment says why)
// and the next one asks again.
func (m *Manager) ask(id string, l *lookup, epoch uint64) {
	terminated, owner, err := m.shared.Lookup(context.Background(), id)
	m.mu.Lock()
	now := m.now()
	delete(m.lookups, id)
	wasFailing := m.failing
	m.failing = err != nil
	switch {
	case err != nil:
	case terminated:
		m.terminated.add(id, now.Add(m.retention), now)
	case epoch == m.epoch:
		m.known.add(id, time.Time{}, now)
		if e := m.known.get(id, now); e != nil {
			e.owner = owner
		}
	}
	l.terminated = err == nil && terminated
	l.owner = owner
	m.mu.Unlock()
	close(l.done)
	switch {
	case err != nil && !wasFailing:
		m.log.Warn("cannot ask the shared state store whether a session was terminated; accepting its id until the store answers", "err", err)
	case err == nil && wasFailing:
		m.log.Info("asking the shared state store about terminated sessions again")
	}
}

// Terminate records the end of a session a client asked for (DELETE): it
// is refused from now on, here and, with a shared store, on every replica.
// Ending an id already ended, or one that is not a session id, is not an
// error; mcp-go drops what it holds for the session afterwards either way.
func (m *Manager) Terminate(id string) (isNotAllowed bool, err error) {
	if !WellFormed(id) {
		return false, nil
	}
	m.mu.Lock()
	now := m.now()
	fresh := m.terminated.add(id, now.Add(m.retention), now)
	m.known.remove(id)
	m.minted.remove(id)
	m.mu.Unlock()
	if fresh && m.shared != nil {
		m.shared.Announce(id, m.retention)
	}
	return false, nil
}

// Terminated reports whether id is refused here now, without asking the
// shared store (for tests and diagnostics).
func (m *Manager) Terminated(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.terminated.has(id, m.now())
}

// heard records a termination another replica announced.
func (m *Manager) heard(id string) {
	if !WellFormed(id) {
		m.log.Warn("ignoring a malformed session termination announcement")
		return
	}
	m.mu.Lock()
	now := m.now()
	m.terminated.add(id, now.Add(m.retention), now)
	m.known.remove(id)
	m.mu.Unlock()
}

// missed forgets which ids were known not to be terminated: announcements
// may have been lost, so each is looked up again, once.
func (m *Manager) missed() {
	m.mu.Lock()
	m.epoch++
	m.known.clear()
	// The store may have lost what it held (a restart): the owner of each
	// session minted here is recorded again on the session's next request.
	for e := m.minted.order.Front(); e != nil; e = e.Next() {
		e.Value.(*idEntry).claimed = time.Time{}
	}
	m.mu.Unlock()
}

// Resolver is what mcp-go gets (server.WithSessionIdManagerResolver).
// A request gets a view that mints ids for the request's principal (their
// owner), and whose Terminate (a DELETE) records the end only when MayEnd
// said EndEverywhere for it; otherwise mcp-go drops the session's state on
// this replica and nothing else happens. mcp-go's own housekeeping, which
// resolves with no request (dropping an idle session, Shutdown), gets a
// view whose Terminate records nothing either (the package comment says
// why).
func (m *Manager) Resolver() server.SessionIdManagerResolver { return resolver{m} }

type resolver struct{ m *Manager }

func (r resolver) ResolveSessionIdManager(req *http.Request) server.SessionIdManager {
	if req == nil {
		return housekeeping{r.m}
	}
	return request{r.m, req.Context()}
}

// request is the manager as mcp-go sees it for one request.
type request struct {
	*Manager
	ctx context.Context
}

func (r request) Generate() string {
	if r.principal == nil {
		return r.Manager.Generate()
	}
	return r.mint(r.principal(r.ctx), true)
}

func (r request) Terminate(id string) (bool, error) {
	if e, _ := r.ctx.Value(endingKey{}).(Ending); e == EndEverywhere {
		return r.Manager.Terminate(id)
	}
	return false, nil
}

// housekeeping is the manager as mcp-go's sweeper and Shutdown see it: the
// session is gone from this replica, so is what it knows of its owner (the
// store keeps it until it expires).
type housekeeping struct{ *Manager }

func (h housekeeping) Terminate(id string) (bool, error) {
	h.mu.Lock()
	h.minted.remove(id)
	h.mu.Unlock()
	return false, nil
}

// WellFormed is mcp-go's check of an id: Prefix and a UUID in any form
// uuid.Parse accepts.
func WellFormed(id string) bool {
	rest, ok := strings.CutPrefix(id, Prefix)
	if !ok {
		return false
	}
	_, err := uuid.Parse(rest)
	return err == nil
}

// idSet is a bounded set of ids in the order they were added, each with an
// optional expiry (zero: none). Entries are added with non-decreasing
// expiries, so the oldest is always first to expire.
type idSet struct {
	limit int
	order *list.List // of idEntry, oldest first
	index map[string]*list.Element
}

type idEntry struct {
	id    string
	until time.Time
	// The owner: for minted ids, the principal they were minted for, and
	// when it was last recorded in the shared store (zero: to record
	// again); for known ids, the one the store held when it was asked (""
	// when none).
	owner   string
	claimed time.Time
}

func newIDSet(limit int) *idSet {
	return &idSet{limit: limit, order: list.New(), index: map[string]*list.Element{}}
}

// has reports whether id is in the set and not expired at now.
func (s *idSet) has(id string, now time.Time) bool { return s.get(id, now) != nil }

// get is id's entry if it is in the set and not expired at now, or nil.
func (s *idSet) get(id string, now time.Time) *idEntry {
	e, ok := s.index[id]
	if !ok {
		return nil
	}
	entry := e.Value.(*idEntry)
	if !entry.until.IsZero() && !now.Before(entry.until) {
		s.drop(e)
		return nil
	}
	return entry
}

// add puts id in the set until until (zero: no expiry), dropping the
// entries expired at now and, past the limit, the oldest. It is false when
// id was there already (kept as it was).
func (s *idSet) add(id string, until, now time.Time) bool {
	if _, ok := s.index[id]; ok {
		return false
	}
	for e := s.order.Front(); e != nil; e = s.order.Front() {
		u := e.Value.(*idEntry).until
		if s.order.Len() < s.limit && (u.IsZero() || now.Before(u)) {
			break
		}
		s.drop(e)
	}
	s.index[id] = s.order.PushBack(&idEntry{id: id, until: until})
	return true
}

// extend sets id's expiry to until, no earlier than any other entry's,
// and so moves it last.
func (s *idSet) extend(id string, until time.Time) {
	if e, ok := s.index[id]; ok {
		e.Value.(*idEntry).until = until
		s.order.MoveToBack(e)
	}
}

func (s *idSet) remove(id string) {
	if e, ok := s.index[id]; ok {
		s.drop(e)
	}
}

func (s *idSet) clear() {
	s.order.Init()
	clear(s.index)
}

func (s *idSet) len() int { return s.order.Len() }

func (s *idSet) drop(e *list.Element) {
	delete(s.index, e.Value.(*idEntry).id)
	s.order.Remove(e)
}
