package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
)

// subscriptions are the clients' resources/subscribe, per URI. The gateway
// subscribes upstream once per URI, when the first client subscribes, and
// unsubscribes when the last one leaves (or its session ends);
// notifications/resources/updated from the upstream goes to every
// subscribed session.
type subscriptions struct {
	// op serialises whole subscribe/unsubscribe operations, upstream round
	// trip included: otherwise a second subscriber could be recorded while
	// the first one's upstream subscribe is failing, and no one would
	// subscribe upstream again.
	op    sync.Mutex
	mu    sync.Mutex
	byURI map[string]map[string]string // uri -> session -> server
}

// add records session's subscription and reports whether it is the URI's
// first.
func (t *subscriptions) add(uri, session, srv string) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byURI == nil {
		t.byURI = map[string]map[string]string{}
	}
	subs := t.byURI[uri]
	if subs == nil {
		subs = map[string]string{}
		t.byURI[uri] = subs
	}
	subs[session] = srv
	return len(subs) == 1
}

// remove forgets session's subscription and reports the server to
// unsubscribe from when it was the URI's last.
func (t *subscriptions) remove(uri, session string) (srv string, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := t.byURI[uri]
	srv, had := subs[session]
	if !had {
		return "", false
	}
	delete(subs, session)
	if len(subs) > 0 {
		return "", false
	}
	delete(t.byURI, uri)
	return srv, true
}

// uris are the URIs session subscribes to.
func (t *subscriptions) uris(session string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for uri, subs := range t.byURI {
		if _, ok := subs[session]; ok {
			out = append(out, uri)
		}
	}
	return out
}

// sessions are those subscribed to uri on srv.
func (t *subscriptions) sessions(srv, uri string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for session, s := range t.byURI[uri] {
		if s == srv {
			out = append(out, session)
		}
	}
	return out
}

// subscriptionParams is what the subscribe hook reads of a request.
type subscriptionParams struct {
	Method string `json:"method"`
	Params struct {
		URI string `json:"uri"`
	} `json:"params"`
}

// interceptSubscription runs before mcp-go handles any request (which only
// acknowledges subscriptions): a resources/subscribe is decided by policy
// and passed upstream here, and refused (a JSON-RPC error) if either
// fails; resources/unsubscribe is recorded and passed on.
func (s *Server) interceptSubscription(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok || server.IsModernRequest(ctx) {
		return nil // 2026-07-28 removed resources/subscribe: mcp-go refuses it after this hook
	}
	// Every request passes here: decode only those that can be one.
	if !bytes.Contains(raw, []byte("subscribe")) {
		return nil
	}
	var m subscriptionParams
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	switch m.Method {
	case string(mcp.MethodResourcesSubscribe):
		return s.subscribe(ctx, m.Params.URI)
	case string(mcp.MethodResourcesUnsubscribe):
		s.unsubscribe(ctx, m.Params.URI)
	}
	return nil
}

var errNoSubscribe = errors.New("the server of this resource does not support subscriptions")

func (s *Server) subscribe(ctx context.Context, uri string) error {
	if uri == "" {
		return nil // mcp-go refuses it with its own error
	}
	f := s.features()
	srv, ok := f.Owner(uri)
	if !ok {
		return errors.New("resource not found")
	}
	if err := s.permit(ctx, srv+"/"+uri, authz.ActRead, map[string]any{"uri": uri}); err != nil {
		return err
	}
	if sf, _ := f.Server(srv); !sf.Subscribe {
		return errNoSubscribe
	}
	s.subs.op.Lock()
	defer s.subs.op.Unlock()
	if !s.subs.add(uri, sessionID(ctx), srv) {
		return nil
	}
	if _, err := s.forward(ctx, srv, string(mcp.MethodResourcesSubscribe), map[string]string{"uri": uri}); err != nil {
		s.subs.remove(uri, sessionID(ctx))
		return err
	}
	return nil
}

func (s *Server) unsubscribe(ctx context.Context, uri string) {
	s.subs.op.Lock()
	defer s.subs.op.Unlock()
	if srv, last := s.subs.remove(uri, sessionID(ctx)); last {
		s.unsubscribeUpstream(srv, uri)
	}
}

// unsubscribeUpstream tells srv no client follows uri any more. It runs
// aside: the client's answer does not wait for it, and a failure only
// costs unneeded notifications (which go to no one).
func (s *Server) unsubscribeUpstream(srv, uri string) {
	go func() {
		ctx := context.Background()
		if _, err := s.forward(ctx, srv, string(mcp.MethodResourcesUnsubscribe), map[string]string{"uri": uri}); err != nil {
			s.log.Debug("upstream unsubscribe failed", "server", srv, "err", err)
		}
	}()
}

// dropSession ends a closed session's subscriptions.
func (s *Server) dropSession(session string) {
	s.subs.op.Lock()
	defer s.subs.op.Unlock()
	for _, uri := range s.subs.uris(session) {
		if srv, last := s.subs.remove(uri, session); last {
			s.unsubscribeUpstream(srv, uri)
		}
	}
}

// Resubscribe subscribes srv again to every URI clients follow on it:
// after a reconnect the upstream (a new process or session) knows none.
// It runs aside; failures are logged.
func (s *Server) Resubscribe(srv string) {
	uris := s.subs.ofServer(srv)
	if len(uris) == 0 {
		return
	}
	go func() {
		for _, uri := range uris {
			if _, err := s.forward(context.Background(), srv, string(mcp.MethodResourcesSubscribe), map[string]string{"uri": uri}); err != nil {
				s.log.Warn("resubscribe after reconnect failed", "server", srv, "err", err)
			}
		}
	}()
}

// ofServer are the URIs someone subscribes to on srv.
func (t *subscriptions) ofServer(srv string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for uri, subs := range t.byURI {
		for _, s := range subs {
			if s == srv {
				out = append(out, uri)
				break
			}
		}
	}
	return out
}

// ResourceUpdated passes an upstream's notifications/resources/updated to
// the sessions subscribed to uri on that server.
func (s *Server) ResourceUpdated(srv, uri string) {
	for _, session := range s.subs.sessions(srv, uri) {
		if err := s.mcp.SendNotificationToSpecificClient(session, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri}); err != nil {
			s.log.Debug("resources/updated not delivered", "session", session, "err", err)
		}
	}
}

func sessionID(ctx context.Context) string {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		return cs.SessionID()
	}
	return ""
}
