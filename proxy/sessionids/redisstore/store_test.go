package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/proxy/sessionids"
)

const prefix = "sessions-test:"

// replica is one replica's session id manager over its own connection to
// the shared store.
func replica(t *testing.T, srv *redistest.Server) (*sessionids.Manager, *redistest.Events) {
	t.Helper()
	c, ev := redistest.Open(t, srv, prefix)
	m := sessionids.New(sessionids.Options{IdleTTL: 10 * time.Minute, Shared: New(c)})
	t.Cleanup(m.Close)
	return m, ev
}

func validate(t *testing.T, m *sessionids.Manager, id string) bool {
	t.Helper()
	terminated, err := m.Validate(id)
	if err != nil {
		t.Fatalf("Validate(%q): %v", id, err)
	}
	return terminated
}

// waitSubscribers waits until n replicas follow the channel, so that an
// announcement made now reaches each.
func waitSubscribers(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		subs, err := rdb.PubSubNumSub(context.Background(), prefix+"session:terminated").Result()
		return err == nil && subs[prefix+"session:terminated"] >= n
	})
}

// waitRecorded waits until the store holds id's end.
func waitRecorded(t *testing.T, srv *redistest.Server, id string) time.Duration {
	t.Helper()
	var ttl time.Duration
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		d, err := rdb.PTTL(context.Background(), prefix+"session:terminated:"+id).Result()
		ttl = d
		return err == nil && d > 0
	})
	return ttl
}

// A session ended on one replica is refused by another that was serving
// it, from the announcement, without asking the store again.
func TestTerminationReachesTheOtherReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := replica(t, srv)
	b, _ := replica(t, srv)
	waitSubscribers(t, srv, 2)
	id := a.Generate()
	if validate(t, b, id) {
		t.Fatal("replica B refused a live session replica A opened")
	}
	a.Terminate(id)
	if !validate(t, a, id) {
		t.Fatal("replica A accepts the session it ended")
	}
	redistest.WaitFor(t, func() bool { return b.Terminated(id) })
	if ttl := waitRecorded(t, srv, id); ttl > 10*time.Minute || ttl < 9*time.Minute {
		t.Fatalf("the end is kept %v in the store, want the idle TTL (10m)", ttl)
	}
}

// A replica that was not listening when the session ended (here: it
// started afterwards) finds the end in the store the first time it sees
// the id.
func TestReplicaThatMissedTheAnnouncementStillRefuses(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := replica(t, srv)
	id := a.Generate()
	a.Terminate(id)
	waitRecorded(t, srv, id)
	late, _ := replica(t, srv)
	if !validate(t, late, id) {
		t.Fatal("a replica started after the DELETE accepts the ended session")
	}
	other := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if validate(t, late, other) {
		t.Fatal("a live session is refused")
	}
}

// A replica whose subscription broke may have missed announcements: once it
// is back, ids it knew are looked up again, and one ended meanwhile is
// refused.
func TestResubscribedReplicaLooksKnownIDsUpAgain(t *testing.T) {
	srv := redistest.Start(t)
	b, ev := replica(t, srv)
	waitSubscribers(t, srv, 1)
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if validate(t, b, id) {
		t.Fatal("refused before anyone ended it")
	}
	srv.Kill()
	ev.WaitStatus(t, false)
	srv.Restart()
	// Ended on another replica while B was cut off: the key is there, the
	// message never reached B.
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		return rdb.Set(context.Background(), prefix+"session:terminated:"+id, "1", time.Minute).Err() == nil
	})
	redistest.WaitFor(t, func() bool { return validate(t, b, id) })
}

// While the store is down, an id the replica has not seen is accepted, and
// each failed lookup is counted; an end made meanwhile is announced once
// the store is back.
func TestStoreDownLetsRequestsThroughAndCounts(t *testing.T) {
	srv := redistest.Start(t)
	m, ev := replica(t, srv)
	srv.Kill()
	ev.WaitStatus(t, false)
	unseen := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	before := ev.ErrorsOf(Feature)
	if validate(t, m, unseen) {
		t.Fatal("refused because the store is down")
	}
	if ev.ErrorsOf(Feature) <= before {
		t.Fatalf("the failed lookup was not counted under %q", Feature)
	}
	ended := m.Generate()
	m.Terminate(ended)
	if !validate(t, m, ended) {
		t.Fatal("the replica that ended the session accepts it while the store is down")
	}
	srv.Restart()
	waitRecorded(t, srv, ended)
}

// A session's owner is recorded in the background for the time asked, and
// read by any replica; an id nobody recorded has no owner, and a store
// that is down is an error, counted.
func TestOwnerIsSharedAndRandomIDsHaveNone(t *testing.T) {
	srv := redistest.Start(t)
	ca, _ := redistest.Open(t, srv, prefix)
	cb, ev := redistest.Open(t, srv, prefix)
	a, b := New(ca), New(cb)
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	a.Claim(id, "alice", 15*time.Minute)
	var ttl time.Duration
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		d, err := rdb.PTTL(context.Background(), prefix+"session:owner:"+id).Result()
		ttl = d
		return err == nil && d > 0
	})
	if ttl > 15*time.Minute || ttl < 14*time.Minute {
		t.Fatalf("the owner is kept %v, want 15m", ttl)
	}
	if owner, found, err := b.Owner(context.Background(), id); owner != "alice" || !found || err != nil {
		t.Fatalf("Owner = %q, %v, %v", owner, found, err)
	}
	random := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if owner, found, err := b.Owner(context.Background(), random); found || owner != "" || err != nil {
		t.Fatalf("Owner of an id nobody minted = %q, %v, %v", owner, found, err)
	}
	srv.Kill()
	ev.WaitStatus(t, false)
	before := ev.ErrorsOf(Feature)
	if _, found, err := b.Owner(context.Background(), id); found || err == nil || ev.ErrorsOf(Feature) <= before {
		t.Fatalf("Owner with the store down: found %v, err %v, counted %v", found, err, ev.ErrorsOf(Feature) > before)
	}
}
