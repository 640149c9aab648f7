package state

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
)

// replica is a policy store as the sync sees it: files, and the version in
// force, swapped in by reload when the files changed. A swap announces, as
// the gateway's Store.Subscribe hook does.
type replica struct {
	name     string
	sync     *PolicySync
	mu       sync.Mutex
	files    string
	current  string
	reloaded chan string // the version in force after each reload
}

func newReplica(t *testing.T, srv *redistest.Server, name, files string) *replica {
	t.Helper()
	c, _ := open(t, srv, "pol:")
	r := &replica{name: name, files: files, current: files, reloaded: make(chan string, 64)}
	r.sync = c.PolicySync(name, r.version, r.reload)
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
	timeout := time.After(deadline)
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
	c, _ := open(t, srv, "pol:")
	late.sync = c.PolicySync(late.name, late.version, late.reload)
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
	waitRedis(t, srv, func(c *Client) bool {
		counts, err := c.rdb.PubSubNumSub(context.Background(), "pol:policy").Result()
		return err == nil && counts["pol:policy"] >= n
	})
}

func waitPublished(t *testing.T, srv *redistest.Server, key, want string) {
	t.Helper()
	waitRedis(t, srv, func(c *Client) bool {
		v, err := c.rdb.Get(context.Background(), key).Result()
		return err == nil && v == want
	})
}

// waitRedis polls the server until cond holds, within the deadline.
func waitRedis(t *testing.T, srv *redistest.Server, cond func(*Client) bool) {
	t.Helper()
	c, err := Open(Options{URL: srv.URL(), DialTimeout: time.Second, OpTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for !cond(c) {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("condition on the Redis server not met in time")
		}
	}
}
