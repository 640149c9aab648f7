package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// eventStore keeps the last messages sent on each session's SSE streams so
// that a client whose stream broke can resume it (Last-Event-ID) without
// losing progress, log lines or the answer itself.
//
// It is also why no notification is lost at the end of a call: without an
// event store, mcp-go's Streamable HTTP server can drop a notification its
// forwarder picked up just as the handler returned (mcp-go trap 5). With
// one, that notification is recorded and written before the response.
//
// mcp-go's InMemoryEventStore keeps every event of a session for the
// session's whole life; a long-lived session would grow without bound.
// This one keeps at most maxEvents and maxBytes per session, dropping the
// oldest: resuming from an event that was dropped answers "unknown event",
// and the client starts a fresh stream.
type eventStore struct {
	maxEvents int
	maxBytes  int

	mu       sync.Mutex
	sessions map[string]*eventLog
}

// Per-session retention of the event store.
const (
	eventStoreMaxEvents = 512
	eventStoreMaxBytes  = 4 << 20
)

type storedEvent struct {
	id, stream string
	message    json.RawMessage
}

type eventLog struct {
	seq    int64
	bytes  int
	events []storedEvent // oldest first
}

func newEventStore(maxEvents, maxBytes int) *eventStore {
	return &eventStore{maxEvents: maxEvents, maxBytes: maxBytes, sessions: map[string]*eventLog{}}
}

// StoreEvent implements server.EventStore.
func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.sessions[sessionID]
	if log == nil {
		log = &eventLog{}
		s.sessions[sessionID] = log
	}
	log.seq++
	id := strconv.FormatInt(log.seq, 10)
	msg := append(json.RawMessage(nil), message...) // the caller may reuse its buffer
	log.events = append(log.events, storedEvent{id: id, stream: streamID, message: msg})
	log.bytes += len(msg)
	for len(log.events) > 1 && (len(log.events) > s.maxEvents || log.bytes > s.maxBytes) {
		log.bytes -= len(log.events[0].message)
		log.events[0] = storedEvent{}
		log.events = log.events[1:]
	}
	return id, nil
}

// ReplayEventsAfter implements server.EventStore.
func (s *eventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	s.mu.Lock()
	log := s.sessions[sessionID]
	var stream string
	var tail []storedEvent
	if log != nil {
		for i, ev := range log.events {
			if ev.id == lastEventID {
				stream = ev.stream
				for _, later := range log.events[i+1:] {
					if later.stream == stream {
						tail = append(tail, later)
					}
				}
				break
			}
		}
	}
	s.mu.Unlock()
	if stream == "" {
		return "", fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	for _, ev := range tail {
		if err := send(ev.id, ev.message); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// PurgeSession implements server.EventStore.
func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionID)
	return nil
}
