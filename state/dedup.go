package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/dedup"
)

// FeatureDedup labels duplicate suppression's operations in the error metric.
const FeatureDedup = "dedup"

// Duplicate suppression across replicas (a dedup.Shared). One key per call,
// under the prefix:
//
//	dedup:<key hex>        a hash, one of
//	                       {s: run, o: owner, u: lease end}      a replica runs the call
//	                       {s: done, a: answer, w: replay end}   it finished; a is the answer
//	                       {s: released}                         it never reached the tool
//	dedup:<key hex>:done   a channel: "done" or "released" when the call ends,
//	                       for the replicas waiting on it
//
// Times are milliseconds of Redis's clock (TIME), the one all replicas share.
//
// The replica that claims a call holds a lease on it and renews it every
// third of the lease while the call runs. Identical calls wait (subscribed
// to the channel, and looking again at least every dedupRecheck) until the
// hash says done. A lease that ran out means the replica stopped mid-call:
// the marker then stays, as "lost", for max(window, lease), and identical
// calls meanwhile get dedup.ErrAbandoned rather than a second execution.
//
// A done answer stays for the window (replays), and at least dedupJoinGrace
// for the callers that were already waiting; a released one lets the next
// caller claim at once.

// DefaultDedupLease is how long a claim lasts without renewal: how long
// identical calls wait for a replica that died mid-call before they are told
// its outcome is unknown.
const DefaultDedupLease = 10 * time.Second

const (
	// dedupRecheck bounds how long a waiting caller trusts the channel alone:
	// a message lost to a reconnect costs at most this much delay.
	dedupRecheck = time.Second
	// dedupJoinGrace keeps a finished answer readable by the callers that
	// were waiting for it, even with a replay window of 0.
	dedupJoinGrace = 10 * time.Second
)

// dedupClaimScript settles who runs a call. KEYS[1] is the call's hash; ARGV is
// owner, lease (ms), hold (ms: how long a lost marker stays after its
// lease), and "1" when the caller was already waiting for this call (it
// then takes any finished answer, and a vanished marker is news to it).
//
// Replies: {"claimed"}; {"run", ms left on the lease}; {"lost"};
// {"done", answer}; {"gone"} (only for a waiting caller: the marker vanished
// without an answer, as when the store lost its data).
const dedupClaimScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 's', 'u', 'a', 'w')
local waiting = ARGV[4] == '1'
if h[1] == 'run' then
  local left = tonumber(h[2]) - now
  if left > 0 then return {'run', left} end
  return {'lost'}
elseif h[1] == 'done' then
  if waiting or now < tonumber(h[4]) then return {'done', h[3]} end
elseif not h[1] and waiting then
  return {'gone'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'run', 'o', ARGV[1], 'u', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return {'claimed'}
`

// dedupRenewScript extends the owner's lease (ARGV owner, lease, hold). A marker
// that vanished (the store restarted) is put back, so identical calls keep
// waiting for the call that is still running; one that is someone else's
// or finished is left alone. It returns 1 when the lease is held.
const dedupRenewScript = `
local h = redis.call('HMGET', KEYS[1], 's', 'o')
if h[1] and (h[1] ~= 'run' or h[2] ~= ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 's', 'run', 'o', ARGV[1], 'u', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
`

// dedupDoneScript records the owner's answer (KEYS[1] the hash, KEYS[2] the
// channel; ARGV owner, answer, window (ms), join grace (ms)) and wakes the
// waiting callers. A marker now someone else's is left alone (0).
const dedupDoneScript = `
local o = redis.call('HGET', KEYS[1], 'o')
if o and o ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'done', 'a', ARGV[2], 'w', now + window)
redis.call('PEXPIRE', KEYS[1], math.max(window, tonumber(ARGV[4]), 1))
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
redis.call('PUBLISH', KEYS[2], 'released')
return 1
`

var (
	claimCall   = redis.NewScript(dedupClaimScript)
	renewCall   = redis.NewScript(dedupRenewScript)
	doneCall    = redis.NewScript(dedupDoneScript)
	releaseCall = redis.NewScript(dedupReleaseScript)
)

// Dedup is duplicate suppression shared by every replica: a dedup.Shared
// over the store (see the key layout above). Every operation is bounded by
// the operation timeout and fails at once while the store is known down;
// waiting for another replica's call is bounded by the caller's context.
type Dedup struct {
	c     *Client
	lease time.Duration
}

// DedupOption configures a Dedup.
type DedupOption func(*Dedup)

// WithLease sets how long a claim lasts without renewal (DefaultDedupLease
// when not given; tests shorten it).
func WithLease(d time.Duration) DedupOption {
	return func(s *Dedup) {
		if d > 0 {
			s.lease = d
		}
	}
}

// Dedup returns duplicate suppression over this store.
func (c *Client) Dedup(opts ...DedupOption) *Dedup {
	d := &Dedup{c: c, lease: DefaultDedupLease}
	for _, o := range opts {
		o(d)
	}
	return d
}

var _ dedup.Shared = (*Dedup)(nil)

// claimReply is dedupClaimScript's answer.
type claimReply struct {
	kind   string
	left   time.Duration
	answer []byte
}

// Claim implements dedup.Shared.
func (d *Dedup) Claim(ctx context.Context, key dedup.Key, window time.Duration) (dedup.Claim, error) {
	k := d.c.key("dedup:" + key.String())
	owner, err := newOwner()
	if err != nil {
		return dedup.Claim{}, err
	}
	r, err := d.claim(ctx, k, owner, window, false)
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
	}
	return d.wait(ctx, k, owner, window)
}

// wait follows an identical call running elsewhere until it ends: woken by
// its channel, and looking again at least every dedupRecheck (and when its
// lease would run out), so a lost message or a dead owner is noticed.
func (d *Dedup) wait(ctx context.Context, k, owner string, window time.Duration) (dedup.Claim, error) {
	var ps *redis.PubSub
	err := d.c.Do(ctx, FeatureDedup, func(ctx context.Context) error {
		ps = d.c.rdb.Subscribe(ctx, k+":done")
		_, err := ps.Receive(ctx) // the subscription is confirmed: no message can be missed from here on
		return err
	})
	if ps != nil {
		defer ps.Close()
	}
	if err != nil {
		return dedup.Claim{}, err
	}
	msgs := ps.Channel()
	for {
		r, err := d.claim(ctx, k, owner, window, true)
		if err != nil {
			return dedup.Claim{}, err
		}
		switch r.kind {
		case "claimed": // the call was released: it never ran, so this one may
			return dedup.Claim{Lease: d.hold(k, owner, window)}, nil
		case "done":
			return dedup.Claim{Answer: r.answer, Sharing: dedup.Joined}, nil
		case "lost", "gone":
			return dedup.Claim{}, dedup.ErrAbandoned
		}
		t := time.NewTimer(min(r.left+time.Millisecond, dedupRecheck))
		select {
		case <-ctx.Done():
			t.Stop()
			return dedup.Claim{}, ctx.Err()
		case <-msgs:
		case <-t.C:
		}
		t.Stop()
	}
}

func (d *Dedup) claim(ctx context.Context, k, owner string, window time.Duration, waiting bool) (claimReply, error) {
	var reply []any
	err := d.c.Do(ctx, FeatureDedup, func(ctx context.Context) error {
		var err error
		reply, err = claimCall.Run(ctx, d.c.rdb, []string{k}, owner, ms(d.lease), ms(d.hold0(window)), flag(waiting)).Slice()
		return err
	})
	if err != nil {
		return claimReply{}, err
	}
	return parseClaim(reply)
}

func parseClaim(reply []any) (claimReply, error) {
	kind, _ := reply[0].(string)
	switch {
	case len(reply) == 1 && (kind == "claimed" || kind == "lost" || kind == "gone"):
		return claimReply{kind: kind}, nil
	case len(reply) == 2 && kind == "run":
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
func (d *Dedup) hold0(window time.Duration) time.Duration { return max(window, d.lease) }

// hold starts renewing a claimed lease until Done or Release.
func (d *Dedup) hold(k, owner string, window time.Duration) *lease {
	l := &lease{d: d, key: k, owner: owner, window: window, stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.renew()
	return l
}

// lease is one claimed call (a dedup.Lease).
type lease struct {
	d          *Dedup
	key, owner string
	window     time.Duration
	stop       chan struct{}
	stopped    chan struct{}
	once       sync.Once
}

// renew extends the lease every third of it until stopped or the client
// closes. A failed renewal is tried again at the next tick: the lease has
// two more thirds to go.
func (l *lease) renew() {
	defer close(l.stopped)
	t := time.NewTicker(l.d.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.d.c.ctx.Done():
			return
		case <-t.C:
		}
		_ = l.d.c.Do(l.d.c.ctx, FeatureDedup, func(ctx context.Context) error {
			return renewCall.Run(ctx, l.d.c.rdb, []string{l.key}, l.owner, ms(l.d.lease), ms(l.d.hold0(l.window))).Err()
		})
	}
}

func (l *lease) end() {
	l.once.Do(func() { close(l.stop) })
	<-l.stopped
}

// Done implements dedup.Lease. When it fails, the marker stays until its
// lease runs out, and then answers "outcome unknown" for the hold time:
// the answer is lost, but the call is never run twice.
func (l *lease) Done(ctx context.Context, answer []byte) error {
	l.end()
	return l.d.c.Do(ctx, FeatureDedup, func(ctx context.Context) error {
		return doneCall.Run(ctx, l.d.c.rdb, []string{l.key, l.key + ":done"}, l.owner, answer, max(l.window.Milliseconds(), 0), ms(dedupJoinGrace)).Err()
	})
}

// Release implements dedup.Lease. When it fails, identical calls meet an
// "outcome unknown" marker for a while, although this one never ran: the
// safe side.
func (l *lease) Release(ctx context.Context) error {
	l.end()
	return l.d.c.Do(ctx, FeatureDedup, func(ctx context.Context) error {
		return releaseCall.Run(ctx, l.d.c.rdb, []string{l.key, l.key + ":done"}, l.owner, ms(dedupJoinGrace)).Err()
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
