package listenstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/server"
)

// A GET carrying Last-Event-ID resumes a stream that broke: the session's
// listening stream, or a POST's response stream (a call's progress and
// answer), whichever the event belongs to. Only the first is where mcp-go
// sends the session's requests, so only it may count as a listening
// stream; counting the second would let a request go out while no
// listening stream is attached, and be lost.
//
// mcp-go does not say which stream a GET resumed, so the event ids say it:
// Resumable wraps the event store mcp-go is given and prefixes every id it
// hands out with the kind of its stream, and Track counts a GET with
// Last-Event-ID only when that id names a listening stream's event. An
// event is a POST's when it is stored on the context of a POST request
// (Track marks those); the listening stream's are stored by mcp-go's
// session pump, on a context of its own.
//
// A client that forges the prefix resumes the same stream as without it
// (the inner store sees the id unprefixed) and only misleads the count of
// its own session: a request may then be sent to it while it is not
// listening, which is what this package prevents for honest clients.

// Prefixes of the event ids Resumable hands out.
const (
	listeningEvent = "l"
	postEvent      = "p"
)

// postKey marks the context of a POST request (Track).
type postKey struct{}

// Resumable wraps inner so that Track can tell a GET that resumes the
// listening stream from one that resumes a POST's stream.
func Resumable(inner server.EventStore) server.EventStore { return &resumable{inner} }

type resumable struct{ inner server.EventStore }

func (s *resumable) StoreEvent(ctx context.Context, session, stream string, message json.RawMessage) (string, error) {
	id, err := s.inner.StoreEvent(ctx, session, stream, message)
	if err != nil {
		return id, err
	}
	if ctx.Value(postKey{}) != nil {
		return postEvent + id, nil
	}
	return listeningEvent + id, nil
}

func (s *resumable) ReplayEventsAfter(ctx context.Context, session, lastEventID string, send func(string, json.RawMessage) error) (string, error) {
	kind := lastEventID[:min(1, len(lastEventID))]
	id, ok := strings.CutPrefix(lastEventID, kind)
	if !ok || (kind != listeningEvent && kind != postEvent) {
		return "", fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	// Every later event of the stream is of its kind.
	return s.inner.ReplayEventsAfter(ctx, session, id, func(eventID string, message json.RawMessage) error {
		return send(kind+eventID, message)
	})
}

func (s *resumable) PurgeSession(ctx context.Context, session string) error {
	return s.inner.PurgeSession(ctx, session)
}

// resumesListening reports whether a GET's Last-Event-ID (empty: a fresh
// GET) attaches it to the listening stream.
func resumesListening(lastEventID string) bool {
	return lastEventID == "" || strings.HasPrefix(lastEventID, listeningEvent)
}
