package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

var _ server.EventStore = (*eventStore)(nil)

func replay(t *testing.T, s *eventStore, session, after string) (string, []string, error) {
	t.Helper()
	var got []string
	stream, err := s.ReplayEventsAfter(context.Background(), session, after, func(id string, m json.RawMessage) error {
		got = append(got, id+"="+string(m))
		return nil
	})
	return stream, got, err
}

func TestEventStoreReplaysTheSameStreamAfterAnID(t *testing.T) {
	s := newEventStore(10, 1<<20, 1<<30)
	ctx := context.Background()
	ids := map[string]string{}
	for _, e := range []struct{ session, stream, msg string }{
		{"s1", "a", `1`}, {"s1", "b", `2`}, {"s1", "a", `3`}, {"s2", "a", `4`}, {"s1", "a", `5`},
	} {
		id, err := s.StoreEvent(ctx, e.session, e.stream, json.RawMessage(e.msg))
		if err != nil {
			t.Fatal(err)
		}
		ids[e.msg] = id
	}
	stream, got, err := replay(t, s, "s1", ids["1"])
	if err != nil || stream != "a" || strings.Join(got, ",") != ids["3"]+"=3,"+ids["5"]+"=5" {
		t.Fatalf("replay after 1: stream %q, %v, %v", stream, got, err)
	}
	if _, _, err := replay(t, s, "s2", ids["5"]); !errors.Is(err, server.ErrUnknownEventID) { // s2 has one event only
		t.Errorf("another session's id replayed: %v", err)
	}
	if err := s.PurgeSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replay(t, s, "s1", ids["3"]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("purged session replayed: %v", err)
	}
}

func TestEventStoreBoundsEachSession(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxEvents, maxByte int
		kept               int
	}{
		{"by count", 3, 1 << 20, 3},
		{"by bytes", 100, 25, 2}, // 10-byte messages: 2 fit in 25 bytes
		{"one oversize event is still kept", 100, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newEventStore(tc.maxEvents, tc.maxByte, 1<<30)
			var ids []string
			for i := 0; i < 6; i++ {
				id, _ := s.StoreEvent(context.Background(), "s", "a", json.RawMessage(`"12345678"`))
				ids = append(ids, id)
			}
			if got := len(s.sessions["s"].events); got != tc.kept {
				t.Fatalf("kept %d events, want %d", got, tc.kept)
			}
			if _, _, err := replay(t, s, "s", ids[0]); !errors.Is(err, server.ErrUnknownEventID) {
				t.Errorf("replay from a dropped event: %v, want unknown", err)
			}
			oldest := ids[len(ids)-tc.kept]
			if _, got, err := replay(t, s, "s", oldest); err != nil || len(got) != tc.kept-1 {
				t.Errorf("replay after the oldest kept: %v %v", got, err)
			}
		})
	}
}

func TestEventStoreTotalCapAndPurgedSessions(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(100, 1<<20, 30) // 10-byte events: three fit in all
	for _, session := range []string{"a", "b", "c", "d"} {
		if _, err := s.StoreEvent(ctx, session, "x", json.RawMessage(`"12345678"`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, kept := s.sessions["a"]; kept || len(s.sessions) != 3 || s.total != 30 {
		t.Errorf("after 40 bytes in 4 sessions with a 30-byte cap: sessions %v, total %d; want a evicted", len(s.sessions), s.total)
	}
	if err := s.PurgeSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	id, _ := s.StoreEvent(ctx, "b", "x", json.RawMessage(`"late"`))
	if _, recreated := s.sessions["b"]; recreated || s.total != 20 {
		t.Errorf("a purged session's late event was stored (id %s, total %d)", id, s.total)
	}
	if _, _, err := replay(t, s, "b", id); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("a purged session's event is resumable: %v", err)
	}
}
