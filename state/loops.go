package state

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// The loops several features run on the store: following a pub/sub
// subscription (Subscribe), and doing background work that must be retried
// while the store is down (Work). Both run until the client is closed.

// subscriptionIdle is how long the subscription may stay silent before a
// PING checks that the connection still works.
const subscriptionIdle = 15 * time.Second

// Subscriber is what a feature does with its pub/sub connection (see
// Client.Subscribe).
type Subscriber struct {
	Feature string // failures are counted under it; "" counts none
	// Subscribed runs on each (re)subscription to channel: messages may
	// have been missed meanwhile, so the feature catches up.
	Subscribed func(channel string)
	Message    func(channel, payload string)
	// Lost and Back are logged once per outage, when the subscription is
	// lost and when it is back ("": not logged).
	Lost, Back string
}

// Subscribe opens a pub/sub connection on channels and hands what arrives
// to sub on a goroutine of the client, until Close (which closes the
// connection). The connection is returned so that the feature may follow
// more channels on it.
func (c *Client) Subscribe(sub Subscriber, channels ...string) *redis.PubSub {
	ps := c.rdb.Subscribe(c.ctx)
	c.Go(func(ctx context.Context) { c.listen(ctx, ps, sub, channels...) }, func() { _ = ps.Close() })
	return ps
}

// Work runs step on a goroutine of the client each time wake is poked,
// until Close: again while step reports more work, and, when it failed,
// again once the store is up (with backoff).
func (c *Client) Work(wake <-chan struct{}, step func(ctx context.Context) (more, failed bool)) {
	c.Go(func(ctx context.Context) { c.drain(ctx, wake, step) }, nil)
}

// listen subscribes ps to channels and hands what arrives to sub until ctx
// ends. A silent connection is pinged, so a dead one fails the next
// receive; a failed one is retried, with backoff, once the store is up.
// go-redis resubscribes by itself when it reconnects.
func (c *Client) listen(ctx context.Context, ps *redis.PubSub, sub Subscriber, channels ...string) {
	_ = ps.Subscribe(ctx, channels...) // on failure, the first Receive connects and subscribes
	retry := c.NewBackoff()
	lost := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, subscriptionIdle)
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if lost && sub.Back != "" {
					c.log.Info(sub.Back)
				}
				lost = false
				sub.Subscribed(m.Channel)
			}
		case *redis.Message:
			sub.Message(m.Channel, m.Payload)
		}
		if err == nil {
			retry.Reset()
			continue
		}
		if isTimeout(err) {
			_ = ps.Ping(ctx)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if sub.Feature != "" {
			c.failed(sub.Feature)
		}
		if !lost && sub.Lost != "" {
			c.log.Warn(sub.Lost, "err", err)
		}
		lost = true
		c.lookNow()
		c.WaitUp(ctx, retry.Wait())
	}
}

// drain runs step each time wake is poked, until ctx ends: again while
// step reports more work, and, when it failed, again once the store is up
// (with backoff).
func (c *Client) drain(ctx context.Context, wake <-chan struct{}, step func(context.Context) (more, failed bool)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		retry := c.NewBackoff()
		for {
			more, failed := step(ctx)
			if failed && !c.WaitUp(ctx, retry.Wait()) {
				return
			}
			if !more && !failed {
				break
			}
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
