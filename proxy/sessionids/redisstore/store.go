package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/state"
)

// Feature labels this store's failures in toolgate_state_errors_total.
const Feature = "sessions"

// A session's owner, and its end, travel as keys and a message:
//
//	session:owner:<id>        the principal that opened the session; expires (PX)
//	                          1.5 idle TTLs after the replica that minted the id last
//	                          recorded it (package sessionids, touch, says when)
//	session:terminated:<id>   "1"; expires (PX) when the manager stops refusing the id
//	session:terminated        the channel: the id
//
// The replica that mints a session id writes its owner in the background
// (Claim); a replica asked to end a session it did not mint reads it
// (Owner, one GET, only for a DELETE), and ends the session for every
// replica only for its owner. So the owner keys are as many as the
// sessions opened within 1.5 idle TTLs, and ends as many as their owners
// ended: a DELETE of another principal's session, or of an id no replica
// minted, writes nothing.
//
// A replica that ends a session writes the key and publishes the id, in
// the background (Announce never waits on the store); every replica,
// subscribed to the channel, adds the id to the ids it refuses. The key is
// what a replica reads for an id it has not seen (Terminated): one that
// was cut off when the message went out, or started afterwards, still
// finds it there. While the store is down, announcements wait (up to
// maxPending, the ones ending first dropped past it) and are sent when it
// is back, unless their time is over; lookups fail at once and the id is
// accepted (package sessionids says why), each failure counted under
// Feature. Owners wait the same way (up to maxPending of their own). A
// DELETE of a session minted elsewhere that cannot read its owner ends the
// session on that replica only (package sessionids, MayEnd). Nothing here
// is read on a request's path except that one lookup per id and replica,
// and the owner of a session a DELETE names.

// maxPending bounds the announcements kept while the store is down: ids of
// about 50 bytes each, so 10,000 is half a megabyte, and more DELETEs than
// clients send during any outage the store's health check would not have
// long reported. The replica that ended the session refuses it either way.
// Owners waiting are bounded alike, apart: past the bound, the owners of
// the sessions opened first in the outage are not recorded, and their
// DELETEs on other replicas end them there only.
const maxPending = 10_000

// batch is how many announcements one round trip carries.
const batch = 256

// Store is a sessionids.Shared kept in Redis.
type Store struct {
	c     *state.Client
	start sync.Once
	wake  chan struct{}

	failing bool // the last announcement failed (and was logged); only step touches it

	mu         sync.Mutex
	pending    map[string]time.Time // id -> when its refusal ends
	overflowed bool                 // pending reached maxPending (and it was logged) since it was last empty
	claims     map[string]claim     // id -> its owner, to record
	claimsOver bool                 // claims reached maxPending (and it was logged) since it was last empty
	followers  map[int]follower
	next       int
}

type claim struct {
	owner string
	until time.Time // when the record expires
}

type follower struct {
	heard  func(id string)
	missed func()
}

// New returns the store over c's connection. It starts its goroutines (on
// the client, until it is closed) when it is first used.
func New(c *state.Client) *Store {
	return &Store{c: c, wake: make(chan struct{}, 1), pending: map[string]time.Time{}, claims: map[string]claim{},
		followers: map[int]follower{}}
}

func (s *Store) channel() string           { return s.c.Key("session:terminated") }
func (s *Store) key(id string) string      { return s.c.Key("session:terminated:" + id) }
func (s *Store) ownerKey(id string) string { return s.c.Key("session:owner:" + id) }

// begin starts the subscription and the announcer, once.
func (s *Store) begin() { s.start.Do(s.run) }

func (s *Store) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) + len(s.claims)
}

// first is the key of m whose until is earliest.
func first[V any](m map[string]V, until func(V) time.Time) string {
	k := ""
	for p, v := range m {
		if k == "" || until(v).Before(until(m[k])) {
			k = p
		}
	}
	return k
}

// snapshot is the followers now, to call without the lock held.
func (s *Store) snapshot() []follower {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]follower, 0, len(s.followers))
	for _, f := range s.followers {
		out = append(out, f)
	}
	return out
}

func (s *Store) run() {
	s.c.Subscribe(state.Subscriber{
		Feature: Feature,
		Subscribed: func(string) {
			for _, f := range s.snapshot() {
				f.missed()
			}
		},
		Message: func(_, id string) {
			for _, f := range s.snapshot() {
				f.heard(id)
			}
		},
		Lost: "not hearing other replicas' session terminations; ids this replica already knows are accepted until the store is back",
		Back: "hearing other replicas' session terminations again; each known session id is looked up once more",
	}, s.channel())
	s.c.Work(s.wake, s.step)
}

// Follow implements sessionids.Shared.
func (s *Store) Follow(heard func(id string), missed func()) (stop func()) {
	s.mu.Lock()
	n := s.next
	s.next++
	s.followers[n] = follower{heard: heard, missed: missed}
	s.mu.Unlock()
	s.begin()
	return func() {
		s.mu.Lock()
		delete(s.followers, n)
		s.mu.Unlock()
	}
}

// Announce implements sessionids.Shared: id is recorded and published in
// the background.
func (s *Store) Announce(id string, ttl time.Duration) {
	until := time.Now().Add(ttl)
	s.mu.Lock()
	if len(s.pending) >= maxPending {
		delete(s.pending, first(s.pending, func(u time.Time) time.Time { return u }))
		if !s.overflowed { // once until the backlog is sent
			s.c.Log().Warn("too many session terminations waiting for the shared state store; the other replicas will not hear of the oldest",
				"waiting", maxPending)
		}
		s.overflowed = true
	}
	s.pending[id] = until
	s.mu.Unlock()
	s.begin()
	s.poke()
}

// Claim implements sessionids.Shared: the owner is recorded in the
// background.
func (s *Store) Claim(id, principal string, ttl time.Duration) {
	until := time.Now().Add(ttl)
	s.mu.Lock()
	if len(s.claims) >= maxPending {
		delete(s.claims, first(s.claims, func(c claim) time.Time { return c.until }))
		if !s.claimsOver {
			s.c.Log().Warn("too many session owners waiting for the shared state store; the other replicas will not let the owners of the oldest end them",
				"waiting", maxPending)
		}
		s.claimsOver = true
	}
	s.claims[id] = claim{owner: principal, until: until}
	s.mu.Unlock()
	s.begin()
	s.poke()
}

// Owner implements sessionids.Shared: one GET, bounded by the client's
// operation timeout, failing at once while the store is down.
func (s *Store) Owner(ctx context.Context, id string) (principal string, found bool, err error) {
	err = s.c.Do(ctx, Feature, func(ctx context.Context) (err error) {
		principal, err = s.c.Redis().Get(ctx, s.ownerKey(id)).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		found = err == nil
		return err
	})
	return principal, found, err
}

// Lookup implements sessionids.Shared: an EXISTS and a GET in one
// pipeline (one round trip, as the EXISTS alone was), bounded by the
// client's operation timeout, failing at once while the store is down.
func (s *Store) Lookup(ctx context.Context, id string) (terminated bool, owner string, err error) {
	err = s.c.Do(ctx, Feature, func(ctx context.Context) error {
		var exists *redis.IntCmd
		var get *redis.StringCmd
		_, err := s.c.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
			exists, get = p.Exists(ctx, s.key(id)), p.Get(ctx, s.ownerKey(id))
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if err := exists.Err(); err != nil {
			return err
		}
		terminated = exists.Val() > 0
		owner = get.Val() // "" when no replica recorded one
		return nil
	})
	return terminated, owner, err
}

// step sends up to one batch of pending owners and announcements. It
// reports whether more are waiting, and whether it failed and must be
// retried.
func (s *Store) step(ctx context.Context) (more, failed bool) {
	now := time.Now()
	ids, ends := make([]string, 0, batch), make([]time.Time, 0, batch)
	owned, owners := make([]string, 0, batch), make([]claim, 0, batch)
	s.mu.Lock()
	for id, c := range s.claims {
		if !now.Before(c.until) {
			delete(s.claims, id) // the record would have expired already
			continue
		}
		if len(owned) < batch {
			owned, owners = append(owned, id), append(owners, c)
		}
	}
	for id, until := range s.pending {
		if !now.Before(until) {
			delete(s.pending, id) // its refusal is over everywhere
			continue
		}
		if len(ids) < batch {
			ids, ends = append(ids, id), append(ends, until)
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 && len(owned) == 0 {
		return false, false
	}
	err := s.c.Do(ctx, Feature, func(ctx context.Context) error {
		cmds, err := s.c.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range owned {
				p.Set(ctx, s.ownerKey(id), owners[i].owner, max(owners[i].until.Sub(now), time.Millisecond))
			}
			for i, id := range ids {
				p.Set(ctx, s.key(id), "1", max(ends[i].Sub(now), time.Millisecond))
				p.Publish(ctx, s.channel(), id)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil && !s.failing {
			s.c.Log().Warn("session terminations not shared with the other replicas yet; retrying while they last",
				"waiting", s.pendingCount(), "err", err)
		}
		s.failing = true
		return true, true
	}
	if s.failing {
		s.c.Log().Info("session terminations shared with the other replicas again")
	}
	s.failing = false
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range ids {
		if s.pending[id].Equal(ends[i]) {
			delete(s.pending, id)
		}
	}
	for i, id := range owned {
		if c, ok := s.claims[id]; ok && c.owner == owners[i].owner && c.until.Equal(owners[i].until) {
			delete(s.claims, id)
		}
	}
	if len(s.pending) == 0 {
		s.overflowed = false
	}
	if len(s.claims) == 0 {
		s.claimsOver = false
	}
	return len(s.pending)+len(s.claims) > 0, false
}
