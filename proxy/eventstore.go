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
// and the client starts a fresh stream. All sessions together keep at most
// maxTotal bytes: past it, the sessions written to least recently lose
// their logs. A session already purged (ended) stores nothing more: a call
// finishing after its session ended must not recreate a log no one frees.
type eventStore struct {
	maxEvents int
	maxBytes  int
	maxTotal  int

	mu       sync.Mutex
	sessions map[string]*eventLog
	total    int      // bytes over all sessions
	clock    int64    // counts stores, for least-recently-written
	purged   []string // the last purged sessions, oldest first (bounded)
	isPurged map[string]bool
}

// Retention of the event store.
const (
	eventStoreMaxEvents = 512      // per session
	eventStoreMaxBytes  = 4 << 20  // per session
	eventStoreMaxTotal  = 64 << 20 // all sessions
	rememberPurged      = 4096     // ended sessions remembered, so nothing is stored for them
)

type storedEvent struct {
	id, stream string
	message    json.RawMessage
}

type eventLog struct {
	seq     int64
	bytes   int
	written int64         // the store's clock at the last write
	events  []storedEvent // oldest first
}

func newEventStore(maxEvents, maxBytes, maxTotal int) *eventStore {
	return &eventStore{maxEvents: maxEvents, maxBytes: maxBytes, maxTotal: maxTotal,
		sessions: map[string]*eventLog{}, isPurged: map[string]bool{}}
}

// StoreEvent implements server.EventStore.
func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isPurged[sessionID] {
		return "gone", nil // delivered live if anyone listens; never resumable
	}
	log := s.sessions[sessionID]
	if log == nil {
		log = &eventLog{}
		s.sessions[sessionID] = log
	}
	s.clock++
	log.seq, log.written = log.seq+1, s.clock
	id := strconv.FormatInt(log.seq, 10)
	msg := append(json.RawMessage(nil), message...) // the caller may reuse its buffer
	log.events = append(log.events, storedEvent{id: id, stream: streamID, message: msg})
	log.bytes += len(msg)
	s.total += len(msg)
	for len(log.events) > 1 && (len(log.events) > s.maxEvents || log.bytes > s.maxBytes) {
		log.bytes -= len(log.events[0].message)
		s.total -= len(log.events[0].message)
		log.events[0] = storedEvent{}
		log.events = log.events[1:]
	}
	s.evictOver(sessionID)
	return id, nil
}

// evictOver drops whole logs, least recently written first, until the
// total is within bounds; the session being written keeps its log.
func (s *eventStore) evictOver(keep string) {
	for s.total > s.maxTotal {
		oldest, at := "", int64(0)
		for id, l := range s.sessions {
			if id != keep && (oldest == "" || l.written < at) {
				oldest, at = id, l.written
			}
		}
		if oldest == "" {
			return
		}
		s.total -= s.sessions[oldest].bytes
		delete(s.sessions, oldest)
	}
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
	if l := s.sessions[sessionID]; l != nil {
		s.total -= l.bytes
		delete(s.sessions, sessionID)
	}
	if !s.isPurged[sessionID] {
		s.isPurged[sessionID] = true
		s.purged = append(s.purged, sessionID)
		if len(s.purged) > rememberPurged {
			delete(s.isPurged, s.purged[0])
			s.purged = s.purged[1:]
		}
	}
	return nil
}
