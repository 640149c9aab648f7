package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// mcp-go ends a session idle for its TTL, and only its own handler marks
// a session active (touchSession in handlePost; the clock is private). A
// session served only by fast calls would look idle to it. The fast path
// used to send the first call of a session in each quarter of the TTL to
// mcp-go instead, but such a call is served the way the fast path exists
// to avoid (its progress split between the GET stream and its own, issue
// 17). So that call is taken like any other, and the session is touched
// through mcp-go with a request of toolgate's own first: a ping, POSTed on
// the session in memory, served by mcp-go's handler into a response no
// one reads.
//
// A ping does nothing else in mcp-go that a client could see: handlePost
// validates the session's id, touches it, answers {} (mcp-go registers no
// hook on ping for toolgate, and toolgate's hook on every request,
// interceptSubscription, lets it pass). Except one thing: while it is
// handled, its notification forwarder drains the session's notifications
// (a list_changed queued for the session, say) onto its response, as it
// would onto the call's had mcp-go served the call. Those are carried over
// to the call's own stream (keepAlive returns them), where they would have
// gone.

// keepAliveID is the id of toolgate's pings; mcp-go only echoes it.
const keepAliveID = `"toolgate-keepalive"`

var keepAliveBody = []byte(`{"jsonrpc":"2.0","id":` + keepAliveID + `,"method":"ping"}`)

// keepAlive touches the session of r (a fast call's request) in mcp-go
// when a quarter of its idle TTL passed since mcp-go last saw it, and
// returns the notifications mcp-go wrote on the ping's response. Of
// concurrent calls of a stale session, one pings.
func (f *fastCalls) keepAlive(r *http.Request, entry *clientSession) []json.RawMessage {
	last := entry.lastSlow.Load()
	if f.fresh(entry) || !entry.lastSlow.CompareAndSwap(last, f.now().UnixNano()) {
		return nil
	}
	ping := r.Clone(r.Context()) // the session's headers, Host and principal
	ping.Body = io.NopCloser(bytes.NewReader(keepAliveBody))
	ping.ContentLength = int64(len(keepAliveBody))
	ping.Header.Del("Content-Length")
	var w discardedAnswer
	f.next.ServeHTTP(&w, ping)
	f.pings.Add(1)
	return w.notifications()
}

// discardedAnswer is the response of a ping no client reads: kept only to
// find the notifications mcp-go wrote on it.
type discardedAnswer struct {
	header http.Header
	body   bytes.Buffer
}

func (d *discardedAnswer) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}

func (d *discardedAnswer) Write(p []byte) (int, error) { return d.body.Write(p) }
func (d *discardedAnswer) WriteHeader(int)             {}
func (d *discardedAnswer) Flush()                      {} // mcp-go streams only to a Flusher

// notifications are the messages of an event stream answer other than the
// ping's answer.
func (d *discardedAnswer) notifications() []json.RawMessage {
	if d.header.Get("Content-Type") != "text/event-stream" {
		return nil
	}
	var notes []json.RawMessage
	for line := range strings.Lines(d.body.String()) {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok || !json.Valid([]byte(data)) {
			continue
		}
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(data), &msg) == nil && string(msg.ID) == keepAliveID {
			continue
		}
		notes = append(notes, json.RawMessage(data))
	}
	return notes
}
