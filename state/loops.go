package state

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// subscriber is what a feature does with its pub/sub connection (see
// Client.listen).
type subscriber struct {
	feature string // failures are counted under it; "" counts none
	// subscribed runs on each (re)subscription to channel: messages may
	// have been missed meanwhile, so the feature catches up.
	subscribed func(channel string)
	message    func(channel, payload string)
	// lost and back are logged once per outage, when the subscription is
	// lost and when it is back ("": not logged).
	lost, back string
}

// listen subscribes ps to channels and hands what arrives to sub until ctx
// ends. A silent connection is pinged, so a dead one fails the next
// receive; a failed one is retried, with backoff, once the store is up.
// go-redis resubscribes by itself when it reconnects.
func (c *Client) listen(ctx context.Context, ps *redis.PubSub, sub subscriber, channels ...string) {
	_ = ps.Subscribe(ctx, channels...) // on failure, the first Receive connects and subscribes
	retry := c.newBackoff()
	lost := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, subscriptionIdle)
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if lost && sub.back != "" {
					c.log.Info(sub.back)
				}
				lost = false
				sub.subscribed(m.Channel)
			}
		case *redis.Message:
			sub.message(m.Channel, m.Payload)
		}
		if err == nil {
			retry.reset()
			continue
		}
		if isTimeout(err) {
			_ = ps.Ping(ctx)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if sub.feature != "" {
			c.failed(sub.feature)
		}
		if !lost && sub.lost != "" {
			c.log.Warn(sub.lost, "err", err)
		}
		lost = true
		c.lookNow()
		c.waitUp(ctx, retry.wait())
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
		retry := c.newBackoff()
		for {
			more, failed := step(ctx)
			if failed && !c.waitUp(ctx, retry.wait()) {
				return
			}
			if !more && !failed {
				break
			}
		}
	}
}
