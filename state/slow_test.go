package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
)

// A Redis that answers, but slower than an operation may wait, is reported
// down, or /readyz would say ok while every shared operation timed out. The
// PING's context allows the dial timeout on top, for a PING that must
// connect first; the read timeout (op_timeout) is what bounds its answer.
func TestSlowStoreIsDown(t *testing.T) {
	srv := redistest.Start(t)
	ev := redistest.NewEvents()
	c, err := state.Open(state.Options{
		URL: srv.URL(), DialTimeout: time.Second, OpTimeout: 100 * time.Millisecond,
		OnStatus: ev.OnStatus, PingEvery: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ev.WaitStatus(t, true)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 800, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	ev.WaitStatus(t, false)
	ev.WaitStatus(t, true) // the pause ends: up again without anything else
}
