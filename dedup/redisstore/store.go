package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/state"
)

// Duplicate suppression across replicas (a dedup.Shared). One key per call,
// under the prefix:
//
//	dedup:<key hex>        a hash, one of
//	                       {s: run, o: owner, u: lease end}      a replica runs the call
//	                       {s: done, a: answer, w: replay end}   it finished; a is the answer
//	                       {s: released}                         it never reached the tool
//	dedup:done             a channel: the call's hash key (dedup:<key hex>,
//	                       prefixed) when a call ends, done or released
//	dedup:<key hex>:done   a channel: "done" or "released" when the call ends
//	                       (kept for replicas of earlier versions, see below)
//	dedup:epoch            a random value, no expiry: its absence means the store
//	                       lost its data (or never had any)
//	dedup:quiet            set, for one lease, when the epoch was found missing:
//	                       no new claim is accepted while it lasts
//
// Times are milliseconds of Redis's clock (TIME), the one all replicas share.
//
// The replica that claims a call holds a lease on it and renews it every
// third of the lease while the call runs. Identical calls wait (woken by
// the channel, and looking again at least every dedupRecheck) until the
// hash says done. A lease that ran out means the replica stopped mid-call:
// the marker then stays, as "lost", for max(window, lease), and identical
// calls meanwhile get dedup.ErrAbandoned rather than a second execution.
//
// A done answer stays for the window (replays), and at least dedupJoinGrace
// for the callers that were already waiting; a released one lets the next
// caller claim at once.
//
// Loss of the store's data. A missing marker means "nobody runs this call",
// which is false right after the store lost its data (a restart without
// persistence, a flush, a failover to an empty server) while some replica
// still runs the call: that replica puts its marker back only at its next
// renewal. So every claim (and renewal) first looks for the epoch key; when
// it is missing, the store has lost its data (or is new): the epoch is
// created again and the quiet key set for one lease, during which claims
// that would take a free call are refused (dedup.RecoveringError), while
// markers that are back are waited for and joined as usual. One lease is
// enough for every live holder to renew, and so re-assert, its marker; each
// replica also renews all its leases at once when its health check sees the
// store come back. A store that is new (the first deployment, or a new key
// prefix) sees one such quiet lease too: it cannot be told apart from one
// that lost its data.
//
// Waking the waiters. Each Store holds one subscription (one connection,
// whatever the number of waiting calls), opened when it is created and
// closed with the Client, to the shared dedup:done channel; a call that
// ends publishes its hash key there, and the subscription wakes the calls
// waiting for that key here through an in-memory registry (waiters). A
// waiter registers before it looks at the hash, so a message sent after it
// looked always finds it registered. A call waiting on its own connection
// (a SUBSCRIBE per waiter, as earlier versions did) would make a burst of
// duplicates (a client's retry storm) one Redis connection each, and could
// exhaust Redis's maxclients and the gateway's descriptors.
//
// The per-key channel is kept, on both sides, for a rolling upgrade and
// for operators: the scripts that end a call still publish on it, so that
// the waiters of a replica of an earlier version (subscribed to it alone)
// are woken at once rather than by their re-check; and the subscription
// also follows, on the same connection, the per-key channel of every call
// waited for here, so that a call run by an earlier replica (which
// publishes only there) wakes this one's waiters at once, and PUBSUB
// NUMSUB on a call's channel still tells how many replicas wait for it.
// Waking never decides anything: a woken waiter looks at the hash again,
// and the re-check covers every message lost while the subscription was
// down (each resubscription also wakes every waiter to look).

// DefaultLease is how long a claim lasts without renewal: how long
// identical calls wait for a replica that died mid-call before they are told
// its outcome is unknown.
const DefaultLease = 10 * time.Second

const (
	// dedupRecheck bounds how long a waiting caller trusts the channel alone:
	// a message lost to a reconnect costs at most this much delay.
	dedupRecheck = time.Second
	// dedupJoinGrace keeps a finished answer readable by the callers that
	// were waiting for it, even with a replay window of 0.
	dedupJoinGrace = 10 * time.Second

	// dedupChannelSuffix ends a call's own channel (and names the shared one).
	dedupChannelSuffix = ":done"
)

// dedupClaimScript settles who runs a call. KEYS[1] is the call's hash; ARGV is
// owner, lease (ms), hold (ms: how long a lost marker stays after its
// lease), and "1" when the caller was already waiting for this call (it
// then takes any finished answer, and a vanished marker is news to it).
//
// KEYS[2] and KEYS[3] are the epoch and quiet keys, ARGV[5] a new epoch
// value (see "Loss of the store's data" above).
//
// Replies: {"claimed"}; {"run", ms left on the lease}; {"lost"};
// {"done", answer}; {"quiet", ms left of the quiet lease} (nothing to join,
// and no claim may be taken yet); {"gone"} (only for a waiting caller: the
// marker vanished without an answer and did not come back).
const dedupClaimScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('SET', KEYS[2], ARGV[5], 'NX') then
  redis.call('SET', KEYS[3], '1', 'PX', tonumber(ARGV[2]))
end
local h = redis.call('HMGET', KEYS[1], 's', 'u', 'a', 'w')
local waiting = ARGV[4] == '1'
if h[1] == 'run' then
  local left = tonumber(h[2]) - now
  if left > 0 then return {'run', left} end
  return {'lost'}
elseif h[1] == 'done' then
  if waiting or now < tonumber(h[4]) then return {'done', h[3]} end
end
local quiet = redis.call('PTTL', KEYS[3])
if quiet > 0 then return {'quiet', quiet} end
if not h[1] and waiting then return {'gone'} end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'run', 'o', ARGV[1], 'u', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return {'claimed'}
`

// dedupRenewScript extends the owner's lease (KEYS the hash, the epoch and
// quiet keys; ARGV owner, lease, hold, a new epoch value). A marker that
// vanished (the store lost its data) is put back, so identical calls keep
// waiting for the call that is still running, and a missing epoch starts
// the quiet lease as a claim would; a marker that is someone else's or
// finished is left alone. It returns 1 when the lease is held.
const dedupRenewScript = `
local h = redis.call('HMGET', KEYS[1], 's', 'o')
if h[1] and (h[1] ~= 'run' or h[2] ~= ARGV[1]) then return 0 end
if redis.call('SET', KEYS[2], ARGV[4], 'NX') then
  redis.call('SET', KEYS[3], '1', 'PX', tonumber(ARGV[2]))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 's', 'run', 'o', ARGV[1], 'u', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
`

// dedupDoneScript records the owner's answer (KEYS[1] the hash, KEYS[2] the
// call's channel, KEYS[3] the shared one; ARGV owner, answer, window (ms),
// join grace (ms)) and wakes the waiting callers: on the shared channel
// (this version's replicas) and on the call's own (earlier versions'). A
// marker now someone else's is left alone (0).
const dedupDoneScript = `
local o = redis.call('HGET', KEYS[1], 'o')
if o and o ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'done', 'a', ARGV[2], 'w', now + window)
redis.call('PEXPIRE', KEYS[1], math.max(window, tonumber(ARGV[4]), 1))
redis.call('PUBLISH', KEYS[3], KEYS[1])
redis.call('PUBLISH', KEYS[2], 'done')
return 1
`

// dedupReleaseScript ends the owner's lease without an answer (KEYS and ARGV
// as dedupDoneScript's first ones): the next caller may claim the call.
const dedupReleaseScript = `
local o = redis.call('HGET', KEYS[1], 'o')
if o ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'released')
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('PUBLISH', KEYS[3], KEYS[1])
redis.call('PUBLISH', KEYS[2], 'released')
return 1
`

var (
	claimCall   = redis.NewScript(dedupClaimScript)
	renewCall   = redis.NewScript(dedupRenewScript)
	doneCall    = redis.NewScript(dedupDoneScript)
	releaseCall = redis.NewScript(dedupReleaseScript)
)

// Store is duplicate suppression shared by every replica: a dedup.Shared
// over the store (see the key layout above). Every operation is bounded by
// the operation timeout and fails at once while the store is known down;
// waiting for another replica's call is bounded by the caller's context.
type Store struct {
	c     *state.Client
	lease time.Duration

	mu     sync.Mutex
	leases map[*lease]struct{} // held here, renewed at once when the store comes back

	wmu     sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // hash key -> the calls waiting for it here
	resync  chan struct{}                         // the set of keys waited for changed

	// recheck is dedupRecheck (tests lengthen it, to tell a wake-up by
	// message from one by the re-check).
	recheck time.Duration
	// looked, when set (tests), is called each time a waiter found the
	// call still running, before it waits for a wake-up or the re-check.
	looked func()

	// replyLost, when set (tests), makes a claim that reached the store
	// fail as if its reply had been lost.
	replyLost func() bool
	// releasing, when set (tests), runs on the goroutine that releases an
	// orphaned claim before it does: a test orders the release against
	// the looks that race with it.
	releasing func(ctx context.Context)
}

// Option configures a Store.
type Option func(*Store)

// WithLease sets how long a claim lasts without renewal (DefaultLease
// when not given; tests shorten it).
func WithLease(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.lease = d
		}
	}
}

// New returns duplicate suppression over c's store.
// Its subscription (see "Waking the waiters") runs until the client closes.
func New(c *state.Client, opts ...Option) *Store {
	d := &Store{c: c, lease: DefaultLease, leases: map[*lease]struct{}{},
		waiters: map[string]map[chan struct{}]struct{}{}, resync: make(chan struct{}, 1),
		recheck: dedupRecheck}
	for _, o := range opts {
		o(d)
	}
	c.OnUp(func() {
		d.renewAll()
		d.wakeAll() // messages were lost while the store was away
	})
	if c.Context().Err() == nil {
		ps := c.Subscribe(d.subscriber(), d.channel())
		c.Go(func(ctx context.Context) { d.follow(ctx, ps) }, nil)
	}
	return d
}

// channel is the shared channel on which every ended call is announced.
func (d *Store) channel() string { return d.c.Key("dedup" + dedupChannelSuffix) }

// subscriber follows the shared channel, and the per-key channels follow
// subscribes. Each (re)subscription to the shared channel wakes every
// waiter to look again, unless the store is known down: a waiter's look
// would fail, and the health check's onUp wakes them when it is back.
func (d *Store) subscriber() state.Subscriber {
	shared := d.channel()
	return state.Subscriber{
		Feature: state.FeatureDedup,
		Subscribed: func(channel string) {
			if channel == shared && d.c.Err() == nil {
				d.wakeAll()
			}
		},
		Message: func(channel, payload string) {
			if channel == shared {
				d.wake(payload)
			} else if k, ok := strings.CutSuffix(channel, dedupChannelSuffix); ok {
				d.wake(k) // from a replica of an earlier version
			}
		},
		Lost: "not hearing of the ends of calls that duplicates wait for; they look again every second until it is back",
		Back: "hearing again of the ends of calls that duplicates wait for",
	}
}

// follow keeps the subscription on the per-key channels of the calls
// waited for here, and on those only, until Close (see "Waking the
// waiters": for replicas of earlier versions, and for PUBSUB NUMSUB). The
// changes of a burst are sent together; the subscription itself
// resubscribes them after a reconnect.
func (d *Store) follow(ctx context.Context, ps *redis.PubSub) {
	on := map[string]struct{}{} // hash keys whose channel was subscribed
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.resync:
		}
		var add, drop []string
		d.wmu.Lock()
		for k := range d.waiters {
			if _, ok := on[k]; !ok {
				add = append(add, k+dedupChannelSuffix)
				on[k] = struct{}{}
			}
		}
		for k := range on {
			if _, ok := d.waiters[k]; !ok {
				drop = append(drop, k+dedupChannelSuffix)
				delete(on, k)
			}
		}
		d.wmu.Unlock()
		// Errors are left to the subscription: the channels are recorded
		// (or forgotten) by it either way, and subscribed on reconnecting.
		opCtx, cancel := context.WithTimeout(ctx, d.c.ConnectTimeout())
		if len(drop) > 0 {
			_ = ps.Unsubscribe(opCtx, drop...)
		}
		if len(add) > 0 {
			_ = ps.Subscribe(opCtx, add...)
		}
		cancel()
	}
}

// await registers a waiter for the call whose hash is k: the channel
// receives (at most one pending) wake-up for each message about k; done
// unregisters it and must be called on every exit. The registry holds only
// keys with waiters.
func (d *Store) await(k string) (wake <-chan struct{}, done func()) {
	ch := make(chan struct{}, 1)
	d.wmu.Lock()
	set, ok := d.waiters[k]
	if !ok {
		set = map[chan struct{}]struct{}{}
		d.waiters[k] = set
	}
	set[ch] = struct{}{}
	d.wmu.Unlock()
	if !ok {
		d.poke()
	}
	return ch, func() {
		d.wmu.Lock()
		delete(set, ch)
		last := len(set) == 0
		if last {
			delete(d.waiters, k)
		}
		d.wmu.Unlock()
		if last {
			d.poke()
		}
	}
}

func (d *Store) poke() {
	select {
	case d.resync <- struct{}{}:
	default:
	}
}

// wake wakes the waiters of the call whose hash is k.
func (d *Store) wake(k string) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for ch := range d.waiters[k] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll wakes every waiter, to look again now.
func (d *Store) wakeAll() {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for _, set := range d.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// waiting is how many calls wait here for the call whose hash is k.
func (d *Store) waiting(k string) int {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return len(d.waiters[k])
}

// renewAll asks every lease held here to renew now: the store just came
// back, maybe without its data, and the markers of the calls running here
// must be back before the quiet lease ends.
func (d *Store) renewAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := range d.leases {
		select {
		case l.now <- struct{}{}:
		default:
		}
	}
}

var _ dedup.Shared = (*Store)(nil)

// claimReply is dedupClaimScript's answer.
type claimReply struct {
	kind   string
	left   time.Duration
	answer []byte
}

// Claim implements dedup.Shared.
func (d *Store) Claim(ctx context.Context, key dedup.Key, window time.Duration) (dedup.Claim, error) {
	k := d.c.Key("dedup:" + key.String())
	owner, err := newOwner()
	if err != nil {
		return dedup.Claim{}, err
	}
	r, err := d.claim(ctx, k, owner, window, false)
	if err != nil && brokenConnection(err) && ctx.Err() == nil {
		// Looked once more, as wait does and for the same reason (a
		// duplicate given up on runs under dedup_on_failure open), under
		// a new owner: the first look's claim, if its script ran, is being
		// released in the background.
		if owner, err = newOwner(); err != nil {
			return dedup.Claim{}, err
		}
		r, err = d.claim(ctx, k, owner, window, false)
	}
	if err != nil {
		return dedup.Claim{}, err
	}
	switch r.kind {
	case "claimed":
		return dedup.Claim{Lease: d.hold(k, owner, window)}, nil
	case "done":
		return dedup.Claim{Answer: r.answer, Sharing: dedup.Replayed}, nil
	case "lost":
		return dedup.Claim{}, dedup.ErrAbandoned
	case "quiet":
		return dedup.Claim{}, &dedup.RecoveringError{Left: r.left}
	}
	return d.wait(ctx, k, owner, window)
}

// wait follows an identical call running elsewhere until it ends: woken by
// the subscription, and looking again at least every recheck (and when its
// lease would run out), so a lost message or a dead owner is noticed. It
// registers before it first looks: a message sent after that look wakes it.
//
// The call waited for is known to be running, so a look that fails does
// not end the wait at once: giving up would refuse a call whose answer is
// coming, and under dedup_on_failure open a waiter given up on would have
// run it again. The wait goes on through
//   - a store that cannot be reached or refuses commands before running
//     them (known down, a refused dial, no free connection, too many
//     clients, a server still loading its data, a replica or a primary
//     that lost its replicas), for up to one lease: when the store is back
//     (its health check wakes every waiter) the call is joined. After a
//     lease the waiter cannot tell what happened: the marker is gone if its
//     holder could not renew it either, while a holder that still reaches
//     the store (only this replica was cut off) may finish and record its
//     answer. So the wait ends as one whose call's outcome is unknown
//     (lostSightError, dedup.ErrAbandoned too): not run, now or on a retry;
//   - a look that broke or timed out under the store (EOF, seen in CI from
//     a waiter looking again around a Redis restart; an operation timeout
//     while the store stalls, before its health check calls it down), up to
//     maxBrokenLooks in a row (an unreachable look between resets the
//     count): a connection that keeps breaking while the store answers its
//     health check ends the wait rather than pile up releases.
//
// Any other failure (a script error, out of memory) ends the wait at once.
//
// A look whose script may have run (one that broke or timed out) is
// followed by one under a new owner: the failed look's claim, if it made
// one, is being released in the background, and that release must not
// take a later claim. Every failure that ends the wait, but the caller's
// own context ending, is dedup.ErrWaitInterrupted, so that the caller is
// refused, never run.
func (d *Store) wait(ctx context.Context, k, owner string, window time.Duration) (dedup.Claim, error) {
	wake, done := d.await(k)
	defer done()
	broken := 0
	var unreachableSince time.Time // the first look, of those failing in a row, that could not reach the store
	for {
		r, err := d.claim(ctx, k, owner, window, true)
		switch {
		case err == nil:
			broken, unreachableSince = 0, time.Time{}
		case ctx.Err() != nil:
			return dedup.Claim{}, ctx.Err()
		case unreachable(err) && unreachableSince.IsZero():
			unreachableSince, broken = time.Now(), 0
		case unreachable(err) && time.Since(unreachableSince) >= d.lease:
			return dedup.Claim{}, &lostSightError{lease: d.lease, err: err}
		case unreachable(err):
			broken = 0
		case brokenLook(err) && broken < maxBrokenLooks:
			broken++
		default:
			return dedup.Claim{}, fmt.Errorf("%w: %w", dedup.ErrWaitInterrupted, err)
		}
		if err != nil {
			if mayHaveRun(err) {
				if owner, err = newOwner(); err != nil {
					return dedup.Claim{}, fmt.Errorf("%w: %w", dedup.ErrWaitInterrupted, err)
				}
			}
			r = claimReply{kind: "run", left: d.recheck}
		}
		switch r.kind {
		case "claimed": // the call was released: it never ran, so this one may
			return dedup.Claim{Lease: d.hold(k, owner, window)}, nil
		case "done":
			return dedup.Claim{Answer: r.answer, Sharing: dedup.Joined}, nil
		case "lost", "gone":
			return dedup.Claim{}, dedup.ErrAbandoned
		}
		// "run", or "quiet": the store lost its data, and the marker of
		// the call waited for may come back with its holder's renewal.
		if d.looked != nil {
			d.looked()
		}
		t := time.NewTimer(min(r.left+time.Millisecond, d.recheck))
		select {
		case <-ctx.Done():
			t.Stop()
			return dedup.Claim{}, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// maxBrokenLooks bounds the looks in a row that a waiter lets fail on a
// broken connection: each leaves a release running in the background for
// up to orphanRetry.
const maxBrokenLooks = 3

// unreachable reports an error of a store that could not be reached or
// refused the command before its script wrote anything: known down
// (state.ErrUnavailable), a dial refused before the health check noticed,
// no connection free in the pool within the operation timeout (a stall
// with many operations in flight), or a server that answers every command
// with an error for now: too many clients, LOADING (reading its data after
// a restart), MASTERDOWN and READONLY (a failover under way; READONLY
// comes at the script's first write, and on a replica every write fails).
func unreachable(err error) bool {
	if errors.Is(err, state.ErrUnavailable) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		return strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "MASTERDOWN") || strings.HasPrefix(msg, "READONLY") ||
			strings.HasPrefix(msg, "ERR max number of clients reached")
	}
	return false
}

// lostSightError ends a wait that could not reach the store for a lease:
// it is dedup.ErrWaitInterrupted and dedup.ErrAbandoned (the outcome of
// the call waited for is unknown), and wraps the last look's error.
type lostSightError struct {
	lease time.Duration
	err   error
}

func (e *lostSightError) Error() string {
	return fmt.Sprintf("dedup: the shared store could not be reached for a lease (%s) while this call waited for an identical call: %v", e.lease, e.err)
}

func (e *lostSightError) Is(target error) bool {
	return target == dedup.ErrWaitInterrupted || target == dedup.ErrAbandoned
}

func (e *lostSightError) Unwrap() error { return e.err }

// mayHaveRun reports whether a look that failed with err may have run its
// script: anything but a store that could not be reached or refused it.
func mayHaveRun(err error) bool { return !unreachable(err) }

// brokenLook reports a look that broke under the command or timed out
// waiting for its reply (the operation timeout, not the caller's context).
func brokenLook(err error) bool {
	var ne net.Error
	return brokenConnection(err) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// brokenConnection reports an error of a connection that broke under the
// command (not ErrUnavailable: the store is not known down; not a reply
// of the store).
func brokenConnection(err error) bool {
	if errors.Is(err, state.ErrUnavailable) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// errReplyLost is the error of a claim whose reply replyLost discarded: as
// the store's restart would break it.
var errReplyLost = fmt.Errorf("the claim's reply was lost (test fault): %w", io.EOF)

// claim runs the claim script for owner. When it fails after the script may
// have been sent (a timeout, a broken connection, the caller leaving), the
// script may have claimed the call for owner, whom nobody will renew or
// settle: such a marker would answer "outcome unknown" for max(window,
// lease) although the call never ran. So owner's claim, if any, is released
// in the background (releaseOrphan).
func (d *Store) claim(ctx context.Context, k, owner string, window time.Duration, waiting bool) (claimReply, error) {
	var reply []any
	epoch, err := newOwner()
	if err != nil {
		return claimReply{}, err
	}
	err = d.c.Do(ctx, state.FeatureDedup, func(ctx context.Context) error {
		var err error
		reply, err = claimCall.Run(ctx, d.c.Redis(), []string{k, d.epochKey(), d.quietKey()},
			owner, ms(d.lease), ms(d.hold0(window)), flag(waiting), epoch).Slice()
		if err == nil && d.replyLost != nil && d.replyLost() {
			err = errReplyLost
		}
		return err
	})
	if err != nil {
		if mayHaveRun(err) {
			d.releaseOrphan(k, owner)
		}
		return claimReply{}, err
	}
	return parseClaim(reply)
}

func (d *Store) epochKey() string { return d.c.Key("dedup:epoch") }
func (d *Store) quietKey() string { return d.c.Key("dedup:quiet") }

// orphanRetry bounds how long releaseOrphan keeps trying while the store
// is down: past it, a marker it could not release answers "outcome
// unknown" until it expires (the safe side).
const orphanRetry = time.Minute

// releaseOrphan releases owner's claim of k, if the claim script made one,
// on a goroutine of the client: each attempt bounded by the operation
// timeout, retried when the store comes back, for orphanRetry at most.
// Releasing is safe because the caller that owned it never ran the call;
// a claim that was not made (someone else's marker, or none) is left alone.
func (d *Store) releaseOrphan(k, owner string) {
	c := d.c
	if c.Context().Err() != nil {
		return
	}
	c.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, orphanRetry)
		defer cancel()
		if d.releasing != nil {
			d.releasing(ctx)
		}
		b := c.NewBackoff()
		for {
			err := c.Do(ctx, state.FeatureDedup, func(ctx context.Context) error {
				return releaseCall.Run(ctx, c.Redis(), []string{k, k + dedupChannelSuffix, d.channel()}, owner, ms(dedupJoinGrace)).Err()
			})
			if err == nil || !c.WaitUp(ctx, b.Wait()) {
				if err != nil {
					c.Log().Warn("shared duplicate suppression: a claim whose reply was lost could not be released; identical calls are refused until it expires", "err", err)
				}
				return
			}
		}
	}, nil)
}

func parseClaim(reply []any) (claimReply, error) {
	kind, _ := reply[0].(string)
	switch {
	case len(reply) == 1 && (kind == "claimed" || kind == "lost" || kind == "gone"):
		return claimReply{kind: kind}, nil
	case len(reply) == 2 && (kind == "run" || kind == "quiet"):
		if left, ok := reply[1].(int64); ok {
			return claimReply{kind: kind, left: time.Duration(left) * time.Millisecond}, nil
		}
	case len(reply) == 2 && kind == "done":
		if a, ok := reply[1].(string); ok {
			return claimReply{kind: kind, answer: []byte(a)}, nil
		}
	}
	return claimReply{}, fmt.Errorf("dedup claim script: unexpected reply %v", reply)
}

// hold0 is how long a lost marker stays after its lease: the replay
// window, but never less than a lease.
func (d *Store) hold0(window time.Duration) time.Duration { return max(window, d.lease) }

// hold starts renewing a claimed lease until Done or Release.
func (d *Store) hold(k, owner string, window time.Duration) *lease {
	l := &lease{d: d, key: k, owner: owner, window: window, now: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	d.mu.Lock()
	d.leases[l] = struct{}{}
	d.mu.Unlock()
	go l.renew()
	return l
}

// lease is one claimed call (a dedup.Lease).
type lease struct {
	d          *Store
	key, owner string
	window     time.Duration
	now        chan struct{} // renew at once (renewAll)
	stop       chan struct{}
	stopped    chan struct{}
	once       sync.Once
}

// renew extends the lease every third of it, and at once when asked
// (renewAll), until stopped or the client closes. A failed renewal is
// tried again at the next tick: the lease has two more thirds to go.
func (l *lease) renew() {
	defer close(l.stopped)
	t := time.NewTicker(l.d.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.d.c.Context().Done():
			return
		case <-t.C:
		case <-l.now:
		}
		epoch, err := newOwner()
		if err != nil {
			continue
		}
		_ = l.d.c.Do(l.d.c.Context(), state.FeatureDedup, func(ctx context.Context) error {
			return renewCall.Run(ctx, l.d.c.Redis(), []string{l.key, l.d.epochKey(), l.d.quietKey()},
				l.owner, ms(l.d.lease), ms(l.d.hold0(l.window)), epoch).Err()
		})
	}
}

func (l *lease) end() {
	l.once.Do(func() {
		close(l.stop)
		l.d.mu.Lock()
		delete(l.d.leases, l)
		l.d.mu.Unlock()
	})
	<-l.stopped
}

// Done implements dedup.Lease. When it fails, the marker stays until its
// lease runs out, and then answers "outcome unknown" for the hold time:
// the answer is lost, but the call is never run twice.
func (l *lease) Done(ctx context.Context, answer []byte) error {
	l.end()
	return l.d.c.Do(ctx, state.FeatureDedup, func(ctx context.Context) error {
		return doneCall.Run(ctx, l.d.c.Redis(), []string{l.key, l.key + dedupChannelSuffix, l.d.channel()}, l.owner, answer, max(l.window.Milliseconds(), 0), ms(dedupJoinGrace)).Err()
	})
}

// Release implements dedup.Lease. When it fails, identical calls meet an
// "outcome unknown" marker for a while, although this one never ran: the
// safe side.
func (l *lease) Release(ctx context.Context) error {
	l.end()
	return l.d.c.Do(ctx, state.FeatureDedup, func(ctx context.Context) error {
		return releaseCall.Run(ctx, l.d.c.Redis(), []string{l.key, l.key + dedupChannelSuffix, l.d.channel()}, l.owner, ms(dedupJoinGrace)).Err()
	})
}

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// newOwner names one claim: random, so that only its holder ends it.
func newOwner() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
