package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
)

// forcing is one call of a Sync's force: a breaker forced open.
type forcing struct {
	server string
	until  time.Time
}

// breakerReplica is a replica as the breaker sync sees it: its forced
// openings arrive on forced.
type breakerReplica struct {
	sync   *Sync
	forced chan forcing
	events *redistest.Events
	seen   map[string]bool // servers waitForced saw forced
}

func newBreakerReplica(t *testing.T, srv *redistest.Server, name string) *breakerReplica {
	t.Helper()
	c, ev := redistest.Open(t, srv, "brk:")
	r := &breakerReplica{forced: make(chan forcing, 64), events: ev, seen: map[string]bool{}}
	r.sync = New(c, name, []string{"up", "other"}, func(server string, until time.Time) {
		r.forced <- forcing{server, until}
	})
	r.sync.Start()
	return r
}

// waitForced waits for a forced opening of server and checks its end:
// what travels is the time left, so the end may be later than until by the
// time it took to arrive; a catch-up reads what Redis has left, in whole
// milliseconds, so it may also be a little earlier. Meanwhile, a server
// seen before may come again (the catch-up of a subscription that raced
// its announcement); any other fails the test.
func (r *breakerReplica) waitForced(t *testing.T, server string, until time.Time) {
	t.Helper()
	lo, hi := until.Add(-50*time.Millisecond), until.Add(redistest.Deadline)
	timeout := time.After(redistest.Deadline)
	for {
		select {
		case f := <-r.forced:
			if f.server != server && r.seen[f.server] {
				continue
			}
			if f.server != server || f.until.Before(lo) || f.until.After(hi) {
				t.Fatalf("forced %s until %v, want %s until between %v and %v", f.server, f.until, server, lo, hi)
			}
			r.seen[server] = true
			return
		case <-timeout:
			t.Fatalf("never forced open %s", server)
		}
	}
}

// noneForced fails if an opening of a server other than those expected
// was forced. Those may come twice (the announcement, and the catch-up of
// a subscription that raced it), as forcing again changes nothing. What
// it checks has happened before it is called (a later announcement was
// seen, or the queue is empty), so nothing more can arrive.
func (r *breakerReplica) noneForced(t *testing.T, expected ...string) {
	t.Helper()
	for {
		select {
		case f := <-r.forced:
			if !slices.Contains(expected, f.server) {
				t.Fatalf("unexpected forced opening of %s until %v", f.server, f.until)
			}
		default:
			return
		}
	}
}

func waitBreakerSubscribed(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		counts, err := rdb.PubSubNumSub(context.Background(), "brk:breaker").Result()
		return err == nil && counts["brk:breaker"] >= n
	})
}

// One replica's opening forces the others open for what is left of it;
// the opening replica hears its own announcement and ignores it; the
// record expires with the opening.
func TestBreakerOpeningPropagates(t *testing.T) {
	srv := redistest.Start(t)
	a, b, c := newBreakerReplica(t, srv, "a"), newBreakerReplica(t, srv, "b"), newBreakerReplica(t, srv, "c")
	waitBreakerSubscribed(t, srv, 3)
	until := time.Now().Add(30 * time.Second)
	a.sync.Opened("up", until)
	b.waitForced(t, "up", until)
	c.waitForced(t, "up", until)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		owner, err := rdb.Get(context.Background(), "brk:breaker:open:up").Result()
		left, _ := rdb.PTTL(context.Background(), "brk:breaker:open:up").Result()
		return err == nil && owner == "a" && left > 20*time.Second && left <= 30*time.Second
	})
	// b's own opening of another server reaches a and c; a heard its own
	// announcement of up before b's (one channel, in order) and ignored it.
	other := time.Now().Add(time.Minute)
	b.sync.Opened("other", other)
	a.waitForced(t, "other", other)
	c.waitForced(t, "other", other)
	a.noneForced(t, "other")
	b.noneForced(t, "up")
}

// A replica that subscribes after an announcement (a new one, or one that
// was cut off) reads the recorded openings and forces what is left of
// them; its own record does not force it.
func TestBreakerCatchesUpOnSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	a := newBreakerReplica(t, srv, "a")
	until := time.Now().Add(time.Minute)
	a.sync.Opened("up", until)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		return rdb.Exists(context.Background(), "brk:breaker:open:up").Val() == 1
	})
	late := newBreakerReplica(t, srv, "late")
	late.waitForced(t, "up", until)
	waitBreakerSubscribed(t, srv, 2)
	again := newBreakerReplica(t, srv, "a") // a restarted under the same name: its own record
	waitBreakerSubscribed(t, srv, 3)
	other := time.Now().Add(time.Minute)
	a.sync.Opened("other", other) // an announcement after its catch-up
	late.waitForced(t, "other", other)
	waitEmpty(t, a.sync)
	again.noneForced(t)
}

// A longer opening recorded by one replica is not shortened by another's
// shorter one; both are announced, and the replicas keep the later end.
func TestBreakerKeepsTheLongerRecord(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newBreakerReplica(t, srv, "a"), newBreakerReplica(t, srv, "b")
	waitBreakerSubscribed(t, srv, 2)
	long, short := time.Now().Add(time.Minute), time.Now().Add(5*time.Second)
	a.sync.Opened("up", long)
	b.waitForced(t, "up", long)
	b.sync.Opened("up", short)
	a.waitForced(t, "up", short)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		owner, _ := rdb.Get(context.Background(), "brk:breaker:open:up").Result()
		left, _ := rdb.PTTL(context.Background(), "brk:breaker:open:up").Result()
		return owner == "a" && left > 30*time.Second
	})
}

// Malformed announcements are ignored.
func TestBreakerIgnoresMalformedAnnouncements(t *testing.T) {
	srv := redistest.Start(t)
	a := newBreakerReplica(t, srv, "a")
	waitBreakerSubscribed(t, srv, 1)
	before := time.Now()
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		for _, msg := range []string{`not json`, `{"replica":"x","open_ms":1000}`, `{"server":"up","replica":"x","open_ms":0}`,
			`{"server":"up","replica":"x","open_ms":-5}`, `{"server":"other","replica":"x","open_ms":60000}`} {
			if rdb.Publish(context.Background(), "brk:breaker", msg).Err() != nil {
				return false
			}
		}
		return true
	})
	a.waitForced(t, "other", before.Add(time.Minute))
	a.noneForced(t)
}

// With the store down, an opening cannot be shared: the failures are
// counted, the other replicas are not forced, and the opening is announced
// once the store is back, if it still lasts. One that ended meanwhile is
// dropped.
func TestBreakerOpeningSharedAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newBreakerReplica(t, srv, "a"), newBreakerReplica(t, srv, "b")
	waitBreakerSubscribed(t, srv, 2)
	srv.Kill()
	a.events.WaitStatus(t, false)
	short := time.Now().Add(100 * time.Millisecond)
	a.sync.Opened("other", short)
	until := time.Now().Add(time.Minute)
	a.sync.Opened("up", until)
	redistest.WaitFor(t, func() bool {
		return a.events.ErrorsOf(state.FeatureBreaker) > 0 && b.events.ErrorsOf(state.FeatureBreaker) > 0
	})
	time.Sleep(time.Until(short)) // let the short opening end: what is tested is that it is not sent late
	srv.Restart()
	b.waitForced(t, "up", until)
	waitEmpty(t, a.sync)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		return rdb.Exists(context.Background(), "brk:breaker:open:other").Val() == 0
	})
	b.noneForced(t, "up")
}

// waitEmpty waits until s has announced everything it was given.
func waitEmpty(t *testing.T, s *Sync) {
	t.Helper()
	redistest.WaitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 0
	})
}
