package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
)

var callKey = dedup.ArgsKey("alice", "orders/refund", []byte(`{"order":1}`))

// seedEpoch marks the store as one that has not lost its data, as a store
// that has been in use for a while is: claims are accepted at once, with no
// quiet lease.
func seedEpoch(t *testing.T, c *state.Client) {
	t.Helper()
	if err := c.Redis().Set(context.Background(), c.Key("dedup:epoch"), "seeded", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// waitMarker waits until the call's hash says s (its marker is back).
func waitMarker(t *testing.T, c *state.Client, key dedup.Key, s string) {
	t.Helper()
	k := c.Key("dedup:" + key.String())
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for {
		got, err := c.Redis().HGet(context.Background(), k, "s").Result()
		if err == nil && got == s {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("the marker of %s says %q (err %v), want %q", key, got, err, s)
		}
	}
}

// waitWaiters waits until n callers wait in d for the call: a waiting
// Claim registers before it looks again, so from then on it can only be
// joined, never replayed.
func waitWaiters(t *testing.T, d *Store, key dedup.Key, n int) {
	t.Helper()
	k := d.c.Key("dedup:" + key.String())
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for {
		got := d.waiting(k)
		if got == n {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d callers wait for %s, want %d", got, key, n)
		}
	}
}

// waitSubscribers waits until n subscriptions (one per Store with waiters
// for the call) follow the call's own channel, on any client.
func waitSubscribers(t *testing.T, c *state.Client, key dedup.Key, n int64) {
	t.Helper()
	waitNumSub(t, c, c.Key("dedup:"+key.String()+":done"), n)
}

// waitNumSub waits until ch has n subscribers.
func waitNumSub(t *testing.T, c *state.Client, ch string, n int64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for {
		got, err := c.Redis().PubSubNumSub(context.Background(), ch).Result()
		if err == nil && got[ch] == n {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d subscribers to %s, want %d (err %v)", got[ch], ch, n, err)
		}
	}
}

type claimResult struct {
	claim dedup.Claim
	err   error
}

func claimAsync(d *Store, key dedup.Key, window time.Duration) chan claimResult {
	out := make(chan claimResult, 1)
	go func() {
		c, err := d.Claim(context.Background(), key, window)
		out <- claimResult{c, err}
	}()
	return out
}

func receive(t *testing.T, ch chan claimResult) claimResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(redistest.Deadline):
		t.Fatal("Claim did not return")
	}
	return claimResult{}
}

// Two replicas (clients) on one server: the first claims the call, the
// second waits for it and is joined with its answer, a third arrival
// replays it within the window, and after a window of 0 the call runs again.
func TestDedupJoinAndReplay(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	da, db := New(a), New(b)
	ctx := context.Background()

	first, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || first.Lease == nil {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	joiner := claimAsync(db, callKey, time.Minute)
	waitWaiters(t, db, callKey, 1)
	if err := first.Lease.Done(ctx, []byte(`{"answer":1}`)); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, joiner); r.err != nil || r.claim.Sharing != dedup.Joined || string(r.claim.Answer) != `{"answer":1}` {
		t.Fatalf("joiner: %+v, %v", r.claim, r.err)
	}
	if c, err := db.Claim(ctx, callKey, time.Minute); err != nil || c.Sharing != dedup.Replayed || string(c.Answer) != `{"answer":1}` {
		t.Fatalf("arrival within the window: %+v, %v", c, err)
	}

	other := dedup.ArgsKey("alice", "orders/refund", []byte(`{"order":2}`))
	c, err := da.Claim(ctx, other, 0)
	if err != nil || c.Lease == nil {
		t.Fatalf("claim with window 0: %+v, %v", c, err)
	}
	if err := c.Lease.Done(ctx, []byte(`{"answer":2}`)); err != nil {
		t.Fatal(err)
	}
	again, err := db.Claim(ctx, other, 0)
	if err != nil || again.Lease == nil {
		t.Fatalf("after a window of 0 the call runs again: %+v, %v", again, err)
	}
	_ = again.Lease.Release(ctx)
}

// A released claim (the call never reached the tool) lets a waiting
// caller run it instead.
func TestDedupRelease(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	ctx := context.Background()
	first, err := New(a).Claim(ctx, callKey, time.Minute)
	if err != nil || first.Lease == nil {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	db := New(b)
	joiner := claimAsync(db, callKey, time.Minute)
	waitWaiters(t, db, callKey, 1)
	if err := first.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := receive(t, joiner)
	if r.err != nil || r.claim.Lease == nil {
		t.Fatalf("waiter after a release: %+v, %v", r.claim, r.err)
	}
	if err := r.claim.Lease.Done(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// A holder keeps its lease alive for as long as the call runs, many leases
// long; one that stops renewing (its replica died) leaves a lost marker:
// the caller waiting for it and later arrivals are told the outcome is
// unknown, and none of them is given the call to run.
func TestDedupLease(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	const short = 150 * time.Millisecond
	da, db := New(a, WithLease(short)), New(b, WithLease(short))
	ctx := context.Background()

	held, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	joiner := claimAsync(db, callKey, time.Minute)
	waitWaiters(t, db, callKey, 1)
	waitRenewals(t, a, callKey, 3) // three renewals: well past the first lease
	if err := held.Lease.Done(ctx, []byte(`"long"`)); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, joiner); r.err != nil || string(r.claim.Answer) != `"long"` {
		t.Fatalf("joiner of a call that outlived its first lease: %+v, %v", r.claim, r.err)
	}

	dead := dedup.ArgsKey("alice", "orders/refund", []byte(`{"order":3}`))
	c, err := da.Claim(ctx, dead, time.Minute)
	if err != nil || c.Lease == nil {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	c.Lease.(*lease).end() // the replica dies: no renewal, no Done
	joiner = claimAsync(db, dead, time.Minute)
	if r := receive(t, joiner); !errors.Is(r.err, dedup.ErrAbandoned) {
		t.Fatalf("waiter of a dead replica's call: %+v, %v", r.claim, r.err)
	}
	if c, err := db.Claim(ctx, dead, time.Minute); !errors.Is(err, dedup.ErrAbandoned) {
		t.Fatalf("later arrival: %+v, %v", c, err)
	}
}

// waitRenewals waits until the holder of key has moved its lease end n
// times.
func waitRenewals(t *testing.T, c *state.Client, key dedup.Key, n int) {
	t.Helper()
	k := c.Key("dedup:" + key.String())
	last, err := c.Redis().HGet(context.Background(), k, "u").Result()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for seen := 0; seen < n; {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d renewals of %d", seen, n)
		}
		if u, err := c.Redis().HGet(context.Background(), k, "u").Result(); err == nil && u != last {
			last = u
			seen++
		}
	}
}

// With the server down a claim fails at once (nothing decided, not
// "abandoned"); the error is counted. After a restart that lost the data,
// claims are refused for one lease (the store is recovering), then work.
func TestDedupStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "t:")
	const short = 300 * time.Millisecond
	d := New(c, WithLease(short))
	seedEpoch(t, c)
	ev.WaitStatus(t, true)
	srv.Kill()
	ev.WaitStatus(t, false)
	_, err := d.Claim(context.Background(), callKey, time.Minute)
	if !errors.Is(err, state.ErrUnavailable) || ev.ErrorsOf(state.FeatureDedup) == 0 {
		t.Fatalf("claim with the server down: %v (errors %d)", err, ev.ErrorsOf(state.FeatureDedup))
	}
	srv.Restart()
	ev.WaitStatus(t, true)
	_, err = d.Claim(context.Background(), callKey, time.Minute)
	var re *dedup.RecoveringError
	if !errors.As(err, &re) || !errors.Is(err, dedup.ErrRecovering) || re.Left <= 0 || re.Left > short {
		t.Fatalf("claim right after a restart without the data: %v", err)
	}
	claimAfterQuiet(t, d, callKey)
}

// claimAfterQuiet claims key as soon as the store's quiet lease is over,
// within the deadline, and releases it.
func claimAfterQuiet(t *testing.T, d *Store, key dedup.Key) {
	t.Helper()
	timeout := time.After(redistest.Deadline)
	for {
		got, err := d.Claim(context.Background(), key, time.Minute)
		if err == nil && got.Lease != nil {
			_ = got.Lease.Release(context.Background())
			return
		}
		var re *dedup.RecoveringError
		if !errors.As(err, &re) {
			t.Fatalf("claim after the quiet lease: %+v, %v", got, err)
		}
		select {
		case <-time.After(re.Left):
		case <-timeout:
			t.Fatal("the store never stopped recovering")
		}
	}
}

// A new store (no epoch) refuses claims for one lease, whoever asks: it
// cannot be told apart from one that lost its data.
func TestDedupNewStoreQuiet(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "t:")
	d := New(c, WithLease(200*time.Millisecond))
	if _, err := d.Claim(context.Background(), callKey, time.Minute); !errors.Is(err, dedup.ErrRecovering) {
		t.Fatalf("first claim on a new store: %v", err)
	}
	if ttl := c.Redis().PTTL(context.Background(), c.Key("dedup:epoch")).Val(); ttl != -1 {
		t.Fatalf("the epoch key must not expire: PTTL %v", ttl)
	}
	claimAfterQuiet(t, d, callKey)
}

// The store restarts empty while a call runs (the bug this guards against:
// its duplicate on another replica found no marker and ran it again). The
// holder's replica renews as soon as its health check sees the store back,
// which puts the marker back; until then, and for the rest of the quiet
// lease, no replica may claim a free call; a duplicate that was waiting
// across the restart, and one that arrives after it, are joined or refused,
// never given the call; the answer reaches them.
func TestDedupStoreLostData(t *testing.T) {
	srv := redistest.Start(t)
	a, evA := redistest.Open(t, srv, "t:")
	b, evB := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	// A lease far longer than the test: only the renewal on the store's
	// return (not the periodic one) can put the marker back in time.
	da, db := New(a, WithLease(time.Hour)), New(b, WithLease(time.Hour))
	ctx := context.Background()
	held, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	waiter := claimAsync(db, callKey, time.Minute)
	waitWaiters(t, db, callKey, 1)

	srv.Kill()
	evA.WaitStatus(t, false)
	evB.WaitStatus(t, false)
	srv.Restart()
	evB.WaitStatus(t, true)
	// Whether or not the holder is back yet, a duplicate is not given the call.
	late := make(chan claimResult, 1)
	go func() {
		for {
			c, err := db.Claim(ctx, callKey, time.Minute)
			var re *dedup.RecoveringError
			if !errors.As(err, &re) {
				late <- claimResult{c, err}
				return
			}
			<-time.After(min(re.Left, 20*time.Millisecond)) // refused for now: try again, as the gateway does
		}
	}()
	other := dedup.ArgsKey("alice", "orders/refund", []byte(`{"order":9}`))
	if c, err := db.Claim(ctx, other, time.Minute); !errors.Is(err, dedup.ErrRecovering) {
		t.Fatalf("a new call within the quiet lease: %+v, %v", c, err)
	}
	evA.WaitStatus(t, true)
	waitMarker(t, a, callKey, "run")
	if err := held.Lease.Done(ctx, []byte(`"once"`)); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan claimResult{"waiting across the restart": waiter, "arriving after it": late} {
		r := receive(t, ch)
		if r.err != nil || r.claim.Lease != nil || string(r.claim.Answer) != `"once"` {
			t.Fatalf("duplicate %s: %+v, %v", name, r.claim, r.err)
		}
	}
}

// A duplicate whose look fails on a broken connection (EOF, as CI saw in
// TestDedupStoreLostData around a Redis restart) goes on waiting and is
// joined with the answer, instead of failing, which under
// dedup_on_failure open would run the call again.
func TestDedupWaiterOutlivesABrokenConnection(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	da, db := New(a), New(b)
	ctx := context.Background()
	held, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	var looks atomic.Int32
	db.replyLost = func() bool { return looks.Add(1) == 2 } // the first look of the wait (the first is Claim's own)
	waiter := claimAsync(db, callKey, time.Minute)
	waitWaiters(t, db, callKey, 1)
	if err := held.Lease.Done(ctx, []byte(`"once"`)); err != nil {
		t.Fatal(err)
	}
	r := receive(t, waiter)
	if r.err != nil || r.claim.Lease != nil || string(r.claim.Answer) != `"once"` || r.claim.Sharing != dedup.Joined {
		t.Fatalf("duplicate after a broken look: %+v, %v", r.claim, r.err)
	}
	if looks.Load() < 3 {
		t.Fatalf("%d looks: the broken one was not followed by another", looks.Load())
	}
}

// A first look that breaks after its script claimed the call is looked
// again under a new owner: that look finds the orphaned claim and waits,
// the orphan is released in the background, and the caller gets the call
// (it never ran) rather than an error.
func TestDedupFirstLookOutlivesABrokenConnection(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, b)
	db := New(b)
	var looks atomic.Int32
	secondLook := make(chan struct{})
	db.replyLost = func() bool {
		n := looks.Add(1)
		if n == 2 {
			close(secondLook)
		}
		return n == 1
	}
	// The release waits for the second look, which so finds the orphan:
	// released first, it would leave nothing to find, and the second look
	// would claim the call (seen in CI). The wait that follows looks at
	// least once more: before the release or after it.
	db.releasing = func(ctx context.Context) {
		select {
		case <-secondLook:
		case <-ctx.Done():
		}
	}
	r := receive(t, claimAsync(db, callKey, time.Minute))
	if r.err != nil || r.claim.Lease == nil {
		t.Fatalf("claim after a broken first look: %+v, %v; want the call", r.claim, r.err)
	}
	_ = r.claim.Lease.Release(context.Background())
	if looks.Load() < 3 {
		t.Fatalf("%d looks: want the broken one, the one that found the orphan, and the one after its release", looks.Load())
	}
}

// waiting is a call held on replica a (lease an hour) and its duplicate
// waiting on replica b, over one server: how each test of a wait starts.
type waiting struct {
	srv      *redistest.Server
	a        *state.Client
	evA, evB *redistest.Events
	db       *Store
	held     dedup.Lease
	waiter   chan claimResult
}

// startWaiting starts it, the waiter's store with lease and recheck, and
// prepare (nil: nothing) run on that store before the waiter looks.
func startWaiting(t *testing.T, lease, recheck time.Duration, prepare func(db *Store)) *waiting {
	t.Helper()
	srv := redistest.Start(t)
	a, evA := redistest.Open(t, srv, "t:")
	b, evB := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	da, db := New(a, WithLease(time.Hour)), New(b, WithLease(lease))
	db.recheck = recheck
	if prepare != nil {
		prepare(db)
	}
	held, err := da.Claim(context.Background(), callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	w := &waiting{srv: srv, a: a, evA: evA, evB: evB, db: db, held: held.Lease, waiter: claimAsync(db, callKey, time.Minute)}
	waitWaiters(t, db, callKey, 1)
	return w
}

// joins ends the held call and wants the waiter to join its answer.
func (w *waiting) joins(t *testing.T, what string) {
	t.Helper()
	if err := w.held.Done(context.Background(), []byte(`"once"`)); err != nil {
		t.Fatal(err)
	}
	r := receive(t, w.waiter)
	if r.err != nil || r.claim.Lease != nil || string(r.claim.Answer) != `"once"` || r.claim.Sharing != dedup.Joined {
		t.Fatalf("duplicate waiting across %s: %+v, %v", what, r.claim, r.err)
	}
}

// A duplicate waiting when the store goes away keeps waiting, although
// its looks fail while the store is down, and joins the answer once the
// store is back: refusing it would have made its client retry, and under
// dedup_on_failure open would have run the call a second time.
func TestDedupWaiterOutlivesAnOutage(t *testing.T) {
	looked := make(chan struct{}, 1)
	w := startWaiting(t, time.Hour, time.Millisecond, func(db *Store) {
		db.looked = func() {
			select {
			case looked <- struct{}{}:
			default:
			}
		}
	})
	w.srv.Kill()
	w.evA.WaitStatus(t, false)
	w.evB.WaitStatus(t, false)
	for i := 0; i < 3; { // looks that found the store down, the waiter still waiting
		select {
		case <-looked:
			i++
		case r := <-w.waiter:
			t.Fatalf("the wait ended while the store was down: %+v, %v", r.claim, r.err)
		}
	}
	w.srv.Restart()
	w.evA.WaitStatus(t, true)
	w.evB.WaitStatus(t, true)
	w.joins(t, "an outage")
}

// A store that stays unreachable for a lease ends the wait: the waiter
// cannot tell what became of the call (its marker is gone if its holder
// could not renew it either). The error is an interrupted wait of an
// abandoned call, so that the caller is told the outcome is unknown and
// the call is not run; it comes a lease after the store went away, not
// before and not much later.
func TestDedupWaiterGivesUpAfterALeaseUnreachable(t *testing.T) {
	const lease = 300 * time.Millisecond
	w := startWaiting(t, lease, 10*time.Millisecond, nil)
	killed := time.Now()
	w.srv.Kill()
	r := receive(t, w.waiter)
	if !errors.Is(r.err, dedup.ErrWaitInterrupted) || !errors.Is(r.err, dedup.ErrAbandoned) || !unreachable(r.err) || r.claim.Lease != nil {
		t.Fatalf("store unreachable for a lease: %+v, %v; want an interrupted wait of an abandoned call", r.claim, r.err)
	}
	// The upper bound is loose (a lease, a recheck, and room for a busy
	// machine): it tells a lease from the hour the holder's lease lasts.
	if waited := time.Since(killed); waited < lease || waited > lease+5*time.Second {
		t.Fatalf("gave up %s after the store went away; the wait allows a lease (%s) from the first failed look", waited, lease)
	}
}

// A store that stalls (every command waits, as under CLIENT PAUSE) times
// the waiter's looks out before its health check calls it down: the
// waiter counts them as broken looks and goes on waiting, and joins the
// answer once the store answers again.
func TestDedupWaiterOutlivesAStall(t *testing.T) {
	w := startWaiting(t, time.Hour, 10*time.Millisecond, nil)
	ctx := context.Background()
	// Longer than the operation timeout (1 s): at least one look times out.
	if err := w.a.Redis().Do(ctx, "CLIENT", "PAUSE", "2500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, func() bool { return w.a.Err() == nil && w.db.c.Err() == nil && pauseOver(ctx, w.a) })
	w.joins(t, "a stall")
}

// pauseOver reports whether the store answers a command again.
func pauseOver(ctx context.Context, c *state.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	return c.Redis().Ping(ctx).Err() == nil
}

// A store that refuses writes (READONLY: the server became a replica, as
// in a failover) keeps the waiter waiting for a lease, starts no release
// (the script wrote nothing), and then ends the wait as an unknown
// outcome.
func TestDedupWaiterThroughAReadOnlyStore(t *testing.T) {
	var releases atomic.Int32
	w := startWaiting(t, 300*time.Millisecond, 10*time.Millisecond, func(db *Store) {
		db.releasing = func(context.Context) { releases.Add(1) }
	})
	if err := w.a.Redis().Do(context.Background(), "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.a.Redis().Do(context.Background(), "REPLICAOF", "NO", "ONE") })
	r := receive(t, w.waiter)
	var reply redis.Error
	if !errors.Is(r.err, dedup.ErrWaitInterrupted) || !errors.Is(r.err, dedup.ErrAbandoned) || !errors.As(r.err, &reply) ||
		!strings.HasPrefix(reply.Error(), "READONLY") || r.claim.Lease != nil {
		t.Fatalf("store read-only for a lease: %+v, %v; want an interrupted wait of an abandoned call, from READONLY", r.claim, r.err)
	}
	if n := releases.Load(); n != 0 {
		t.Fatalf("%d background releases for looks whose script wrote nothing", n)
	}
}

// redisReply is a reply error of the server (go-redis's redis.Error).
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

// What a waiter waits through: a store it cannot reach or that refuses
// every command for now (up to a lease), and a look that broke or timed out
// (up to maxBrokenLooks in a row); anything else ends the wait at once.
func TestWaiterErrorKinds(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name                   string
		err                    error
		unreachable, brokenish bool
	}{
		{"known down", fmt.Errorf("shared state: %w", state.ErrUnavailable), true, false},
		{"refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true, false},
		{"loading", redisReply("LOADING Redis is loading the dataset in memory"), true, false},
		{"failover", redisReply("READONLY You can't write against a read only replica."), true, false},
		{"no quorum", redisReply("MASTERDOWN Link with MASTER is down"), true, false},
		{"broken connection", fmt.Errorf("read: %w", io.EOF), false, true},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false, true},
		{"operation timeout", fmt.Errorf("dedup: %w", context.DeadlineExceeded), false, true},
		{"read timeout", timeout, false, true},
		{"no free connection", fmt.Errorf("dedup: %w", redis.ErrPoolTimeout), true, false},
		{"too many clients", redisReply("ERR max number of clients reached"), true, false},
		{"script error", redisReply("ERR Error running script"), false, false},
	} {
		if got := unreachable(tc.err); got != tc.unreachable {
			t.Errorf("%s: unreachable %v, want %v", tc.name, got, tc.unreachable)
		}
		if got := brokenLook(tc.err); got != tc.brokenish {
			t.Errorf("%s: brokenLook %v, want %v", tc.name, got, tc.brokenish)
		}
		if got := mayHaveRun(tc.err); got == tc.unreachable {
			t.Errorf("%s: mayHaveRun %v: a look that reached no script cannot have run it, any other may have", tc.name, got)
		}
	}
}

// A connection that keeps breaking while the store answers its health
// check ends the wait after maxBrokenLooks more looks, with the error.
func TestDedupWaiterGivesUpOnAConnectionThatKeepsBreaking(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	da, db := New(a), New(b)
	db.recheck = time.Millisecond
	held, err := da.Claim(context.Background(), callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	defer held.Lease.Release(context.Background())
	var looks atomic.Int32
	db.replyLost = func() bool { return looks.Add(1) > 1 } // every look of the wait breaks
	r := receive(t, claimAsync(db, callKey, time.Minute))
	if !errors.Is(r.err, io.EOF) || !errors.Is(r.err, dedup.ErrWaitInterrupted) || r.claim.Lease != nil {
		t.Fatalf("after broken looks: %+v, %v; want the EOF, as an interrupted wait", r.claim, r.err)
	}
	if n := looks.Load(); n != 1+1+maxBrokenLooks {
		t.Fatalf("%d looks, want Claim's own, then %d broken ones let go and the one that ends it", n, maxBrokenLooks)
	}
}

// A claim whose reply is lost (a timeout after the script ran) leaves a
// marker owned by nobody: it is released in the background, so the call,
// which never ran, can be claimed again at once rather than answering
// "outcome unknown" for the hold time.
func TestDedupLostClaimReply(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	da := New(a)
	da.replyLost = func() bool { return true }
	if c, err := da.Claim(context.Background(), callKey, 24*time.Hour); err == nil {
		t.Fatalf("claim with its reply lost: %+v", c)
	}
	waitMarker(t, b, callKey, "released")
	got, err := New(b).Claim(context.Background(), callKey, 24*time.Hour)
	if err != nil || got.Lease == nil {
		t.Fatalf("claim after a lost reply: %+v, %v", got, err)
	}
	_ = got.Lease.Release(context.Background())
}

// A waiting caller whose context ends stops waiting with its error.
func TestDedupWaitCancelled(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	seedEpoch(t, a)
	held, err := New(a).Claim(context.Background(), callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	defer held.Lease.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	db := New(b)
	go func() {
		_, err := db.Claim(ctx, callKey, time.Minute)
		out <- err
	}()
	waitWaiters(t, db, callKey, 1)
	cancel()
	select {
	case err := <-out:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		if n := db.waiting(db.c.Key("dedup:" + callKey.String())); n != 0 {
			t.Fatalf("a cancelled waiter stayed registered: %d", n)
		}
	case <-time.After(redistest.Deadline):
		t.Fatal("a cancelled waiter went on waiting")
	}
}
