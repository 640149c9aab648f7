package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/internal/redistest"
)

var callKey = dedup.ArgsKey("alice", "orders/refund", []byte(`{"order":1}`))

// waitSubscribers waits until n callers wait on the call's channel: a
// waiting Claim subscribes before it looks again, so from then on it can
// only be joined, never replayed.
func waitSubscribers(t *testing.T, c *Client, key dedup.Key, n int64) {
	t.Helper()
	ch := c.key("dedup:" + key.String() + ":done")
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for {
		got, err := c.rdb.PubSubNumSub(context.Background(), ch).Result()
		if err == nil && got[ch] == n {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d callers wait on %s, want %d (err %v)", got[ch], ch, n, err)
		}
	}
}

type claimResult struct {
	claim dedup.Claim
	err   error
}

func claimAsync(d *Dedup, key dedup.Key, window time.Duration) chan claimResult {
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
	case <-time.After(deadline):
		t.Fatal("Claim did not return")
	}
	return claimResult{}
}

// Two replicas (clients) on one server: the first claims the call, the
// second waits for it and is joined with its answer, a third arrival
// replays it within the window, and after a window of 0 the call runs again.
func TestDedupJoinAndReplay(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := open(t, srv, "t:")
	b, _ := open(t, srv, "t:")
	da, db := a.Dedup(), b.Dedup()
	ctx := context.Background()

	first, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || first.Lease == nil {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	joiner := claimAsync(db, callKey, time.Minute)
	waitSubscribers(t, a, callKey, 1)
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
	a, _ := open(t, srv, "t:")
	b, _ := open(t, srv, "t:")
	ctx := context.Background()
	first, err := a.Dedup().Claim(ctx, callKey, time.Minute)
	if err != nil || first.Lease == nil {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	joiner := claimAsync(b.Dedup(), callKey, time.Minute)
	waitSubscribers(t, a, callKey, 1)
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
	a, _ := open(t, srv, "t:")
	b, _ := open(t, srv, "t:")
	const short = 150 * time.Millisecond
	da, db := a.Dedup(WithLease(short)), b.Dedup(WithLease(short))
	ctx := context.Background()

	held, err := da.Claim(ctx, callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	joiner := claimAsync(db, callKey, time.Minute)
	waitSubscribers(t, a, callKey, 1)
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
func waitRenewals(t *testing.T, c *Client, key dedup.Key, n int) {
	t.Helper()
	k := c.key("dedup:" + key.String())
	last, err := c.rdb.HGet(context.Background(), k, "u").Result()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for seen := 0; seen < n; {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d renewals of %d", seen, n)
		}
		if u, err := c.rdb.HGet(context.Background(), k, "u").Result(); err == nil && u != last {
			last = u
			seen++
		}
	}
}

// With the server down a claim fails at once (nothing decided, not
// "abandoned"); the error is counted; claims work again after a restart.
func TestDedupStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := open(t, srv, "t:")
	d := c.Dedup()
	ev.waitStatus(t, true)
	srv.Kill()
	ev.waitStatus(t, false)
	_, err := d.Claim(context.Background(), callKey, time.Minute)
	if !errors.Is(err, ErrUnavailable) || ev.errorsOf(FeatureDedup) == 0 {
		t.Fatalf("claim with the server down: %v (errors %d)", err, ev.errorsOf(FeatureDedup))
	}
	srv.Restart()
	ev.waitStatus(t, true)
	got, err := d.Claim(context.Background(), callKey, time.Minute)
	if err != nil || got.Lease == nil {
		t.Fatalf("claim after the restart: %+v, %v", got, err)
	}
	_ = got.Lease.Release(context.Background())
}

// A waiting caller whose context ends stops waiting with its error.
func TestDedupWaitCancelled(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := open(t, srv, "t:")
	b, _ := open(t, srv, "t:")
	held, err := a.Dedup().Claim(context.Background(), callKey, time.Minute)
	if err != nil || held.Lease == nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	defer held.Lease.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() {
		_, err := b.Dedup().Claim(ctx, callKey, time.Minute)
		out <- err
	}()
	waitSubscribers(t, a, callKey, 1)
	cancel()
	select {
	case err := <-out:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("a cancelled waiter went on waiting")
	}
}
