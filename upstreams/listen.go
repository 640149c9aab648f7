package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
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
	// refused: the upstream answered subscriptions/listen as a method it
	// does not serve. The request is not sent again on this connection.
	refused atomic.Bool
}

// subscriptions/listen is optional: a 2026-07-28 upstream may lack it
// (HTTP 404 or 405, or JSON-RPC -32601 Method not found). That is not a
// dead connection, and taking the connection down for it reconnected for
// ever while every call was refused (issue 17, item 6). The connection
// stays up; the supervisor logs once what the upstream lacks and falls
// back: it re-reads the upstream's tools, resources and prompts every
// listPoll and on each reconnect (in place of list_changed), and the
// upstream's resources no longer offer subscriptions (resources/subscribe
// for them is refused: toolgate could not pass their updates on).

// listen (re)starts the connection's subscriptions/listen request with
// the current URIs. The previous request, if any, is cancelled (the
// upstream is told, like any abandoned request).
func (c *Conn) listen() {
	c.listener.mu.Lock()
	defer c.listener.mu.Unlock()
	if c.listener.cancel != nil {
		c.listener.cancel()
	}
	if c.listener.refused.Load() {
		return
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
			if listenNotServed(err) {
				c.listenRefused(err)
				return
			}
			c.log.Warn("subscriptions/listen ended; list changes and resource updates are not received until the next reconnect",
				"err", err.Error())
		}
	})
}

// listenNotServed reports whether err is an upstream's answer that it
// does not serve subscriptions/listen: HTTP 404 (errNotServed) or 405, or
// JSON-RPC -32601, whatever the HTTP status that carried it.
func listenNotServed(err error) bool {
	var ce *CallError
	if errors.As(err, &ce) && ce.RPC != nil {
		return ce.RPC.Code == mcp.METHOD_NOT_FOUND
	}
	return errors.Is(err, errNotServed) || strings.Contains(err.Error(), "request failed with status 405")
}

// listenRefused records that the upstream does not serve
// subscriptions/listen, and tells the supervisor (which logs it once and
// re-lists the features, so the catalog stops offering subscriptions).
// Without a supervisor, the connection logs it itself.
func (c *Conn) listenRefused(err error) {
	if !c.listener.refused.CompareAndSwap(false, true) {
		return
	}
	if c.hooks.listenRefused != nil {
		c.hooks.listenRefused(err)
		return
	}
	c.log.Warn("upstream does not support subscriptions/listen: its list changes and resource updates are not received",
		"err", sanitize.Text(err.Error()))
}

// ListenRefused reports whether the upstream answered subscriptions/listen
// as a method it does not serve.
func (c *Conn) ListenRefused() bool { return c.listener.refused.Load() }

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
	if c.listener.refused.Load() && method == string(mcp.MethodResourcesSubscribe) {
		return nil, &CallError{Where: NotSent, Err: errors.New("the upstream does not support subscriptions/listen: toolgate cannot pass its resource updates on")}
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
