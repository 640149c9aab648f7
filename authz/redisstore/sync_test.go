package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
)

// replica is a policy store as the sync sees it: files, and the version in
// force, swapped in by reload when the files changed. A swap announces, as
// the gateway's Store.Subscribe hook does.
type replica struct {
	name     string
	sync     *Sync
	mu       sync.Mutex
	files    string
	current  string
	reloaded chan string // the version in force after each reload
}

func newReplica(t *testing.T, srv *redistest.Server, name, files string) *replica {
	t.Helper()
	c, _ := redistest.Open(t, srv, "pol:")
	r := &replica{name: name, files: files, current: files, reloaded: make(chan string, 64)}
	r.sync = New(c, name, r.version, r.reload)
	r.sync.Start()
	return r
}

func (r *replica) version() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

func (r *replica) write(files string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files = files
}

func (r *replica) reload() error {
	r.mu.Lock()
	swapped := r.current != r.files
	r.current = r.files
	v := r.current
	r.mu.Unlock()
	if swapped {
		r.sync.Announce(v)
	}
	r.reloaded <- v
	return nil
}

// waitVersion waits until a reload leaves r on version.
func (r *replica) waitVersion(t *testing.T, version string) {
	t.Helper()
	timeout := time.After(redistest.Deadline)
	for r.version() != version {
		select {
		case <-r.reloaded:
		case <-timeout:
			t.Fatalf("%s: still on %q, want %q", r.name, r.version(), version)
		}
	}
}

// One replica's reload makes the others re-read their files.
func TestPolicyReloadPropagates(t *testing.T) {
	srv := redistest.Start(t)
	a, b, c := newReplica(t, srv, "a", "v1"), newReplica(t, srv, "b", "v1"), newReplica(t, srv, "c", "v1")
	waitSubscribed(t, srv, 3)
	for _, r := range []*replica{a, b, c} {
		r.write("v2")
	}
	_ = a.reload()
	b.waitVersion(t, "v2")
	c.waitVersion(t, "v2")
}

// A replica that joins (or reconnects) after an announcement compares the
// published version with its own and re-reads its files.
func TestPolicyReconcilesOnConnect(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, srv, "a", "v1")
	waitSubscribed(t, srv, 1)
	a.write("v2")
	_ = a.reload()
	waitPublished(t, srv, "pol:policy:version", "v2")

	late := &replica{name: "late", files: "v2", current: "v1", reloaded: make(chan string, 64)}
	c, _ := redistest.Open(t, srv, "pol:")
	late.sync = New(c, late.name, late.version, late.reload)
	late.sync.Start()
	late.waitVersion(t, "v2")
}

// A replica that missed a reload and then offered its stale version to an
// emptied store does not hold the others back: an up-to-date replica that
// connects announces its own, and the stale one re-reads its files.
func TestStalePublishedVersionIsCorrected(t *testing.T) {
	srv := redistest.Start(t)
	stale := newReplica(t, srv, "stale", "v1")
	stale.write("v2") // it missed the announcement of v2
	waitPublished(t, srv, "pol:policy:version", "v1")
	newReplica(t, srv, "current", "v2")
	stale.waitVersion(t, "v2")
}

// A reload made while the store is down is announced when it comes back
// (empty, as a restarted Redis without persistence is), and the others
// catch up.
func TestPolicyAnnouncedAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newReplica(t, srv, "a", "v1"), newReplica(t, srv, "b", "v1")
	waitSubscribed(t, srv, 2)
	srv.Kill()
	a.write("v2")
	b.write("v2")
	_ = a.reload()
	if b.version() != "v1" {
		t.Fatal("b reloaded with the store down")
	}
	srv.Restart()
	b.waitVersion(t, "v2")
}

// waitSubscribed waits until n clients listen on the policy channel, so an
// announcement cannot overtake a subscription.
func waitSubscribed(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		counts, err := rdb.PubSubNumSub(context.Background(), "pol:policy").Result()
		return err == nil && counts["pol:policy"] >= n
	})
}

func waitPublished(t *testing.T, srv *redistest.Server, key, want string) {
	t.Helper()
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		v, err := rdb.Get(context.Background(), key).Result()
		return err == nil && v == want
	})
}
