package proxy

import (
	"encoding/json"
	"testing"
	"time"
)

// Only ids mcp-go writes back with the client's very bytes take the fast
// path: a string without escapes, or an integer of up to 15 digits.
func TestPlainID(t *testing.T) {
	for id, want := range map[string]bool{
		`1`: true, `-4`: true, `0`: true, `123456789012345`: true, `"abc"`: true, `""`: true, `"a-1 b"`: true,
		`1234567890123456`: false, `1.5`: false, `1e3`: false, `01`: false, `-0`: false, `-`: false, `"a\u0041"`: false,
		`"a\"b"`: false, `null`: false, ``: false, `{}`: false, `[1]`: false, `true`: false,
	} {
		if got := plainID(json.RawMessage(id)); got != want {
			t.Errorf("plainID(%s) = %v, want %v", id, got, want)
		}
	}
}

// A session served only by fast calls would look idle to mcp-go, which
// ends sessions idle for its TTL: once a quarter of the TTL passed since
// mcp-go last saw the session, the next request goes to mcp-go.
func TestFastPathKeepsSessionsAlive(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := &fastCalls{idleTTL: 8 * time.Minute, now: func() time.Time { return now }}
	entry := &clientSession{}
	f.markSlow(entry)
	cases := []struct {
		after time.Duration
		fresh bool
	}{{0, true}, {time.Minute, true}, {2*time.Minute - time.Nanosecond, true}, {2 * time.Minute, false}, {time.Hour, false}}
	start := now
	for _, c := range cases {
		now = start.Add(c.after)
		if got := f.fresh(entry); got != c.fresh {
			t.Errorf("%v after mcp-go saw the session: fresh %v, want %v", c.after, got, c.fresh)
		}
	}
	f.markSlow(entry)
	if !f.fresh(entry) {
		t.Error("a request handed to mcp-go did not refresh the session")
	}
	if (&fastCalls{now: time.Now}).fresh(&clientSession{}) != true {
		t.Error("without an idle TTL every session is fresh")
	}
}
