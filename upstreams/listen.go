package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Protocol 2026-07-28 removed resources/subscribe and the listening
// stream: a client that wants notifications keeps one subscriptions/listen
// request open, naming what it wants (list changes, resource URIs), and
// the server sends them while that request lasts. For a modern upstream
// the gateway keeps one such request open per connection, and replaces it
// whenever the set of subscribed URIs changes.
type listener struct {
	mu     sync.Mutex
	uris   map[string]bool
	cancel context.CancelFunc // ends the current listen request; nil before the first
}

// listen (re)starts the connection's subscriptions/listen request with
// the current URIs. The previous request, if any, is cancelled (the
// upstream is told, like any abandoned request).
func (c *Conn) listen() {
	c.listener.mu.Lock()
	defer c.listener.mu.Unlock()
	if c.listener.cancel != nil {
		c.listener.cancel()
	}
	ctx, cancel := context.WithCancel(c.life)
	c.listener.cancel = cancel
	params := mcp.SubscriptionsListenParams{Notifications: mcp.SubscriptionFilter{
		ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true,
		ResourceSubscriptions: c.listenURIs(),
	}}
	c.goTracked(func() {
		_, err := c.roundTrip(ctx, string(mcp.MethodSubscriptionsListen), params, nil, nil)
		if err != nil && ctx.Err() == nil && c.life.Err() == nil {
			c.log.Warn("subscriptions/listen ended; list changes and resource updates are not received until the next reconnect",
				"err", err.Error())
		}
	})
}

// listenURIs is the sorted set of subscribed URIs. listener.mu is held.
func (c *Conn) listenURIs() []string {
	uris := make([]string, 0, len(c.listener.uris))
	for u := range c.listener.uris {
		uris = append(uris, u)
	}
	sort.Strings(uris)
	return uris
}

// modernSubscription answers resources/subscribe and unsubscribe for a
// modern upstream by changing what the listen request asks for.
func (c *Conn) modernSubscription(method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, &CallError{Where: NotSent, Err: err}
	}
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.URI == "" {
		return nil, &CallError{Where: NotSent, Err: errors.New("subscription without a uri")}
	}
	c.listener.mu.Lock()
	if c.listener.uris == nil {
		c.listener.uris = map[string]bool{}
	}
	before := slices.Clone(c.listenURIs())
	if method == string(mcp.MethodResourcesSubscribe) {
		c.listener.uris[p.URI] = true
	} else {
		delete(c.listener.uris, p.URI)
	}
	changed := !slices.Equal(before, c.listenURIs())
	c.listener.mu.Unlock()
	if changed {
		c.listen()
	}
	return json.RawMessage(`{}`), nil
}
