package gateway

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// What net/http itself complains about on a listener the gateway serves (a
// handler's panic it recovers, a TLS handshake that failed, an accept
// error) is a line of the gateway's log at warn level, not raw text on
// stderr in the middle of a batch of JSON lines.
func TestNetHTTPComplaintsAreLogLines(t *testing.T) {
	var out testkit.LogBuffer
	g := &Gateway{log: slog.New(slog.NewJSONHandler(&out, nil)), serving: serving{failed: make(chan error, 1)}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := g.serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug in a handler") }))
	defer l.srv.Close()
	if resp, err := http.Get("http://" + l.addr + "/"); err == nil { // net/http closes the connection on a panic
		resp.Body.Close()
	}
	// The panic's line is written before the connection closes, so it is in
	// out by the time the client sees the close.
	var rec map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec["msg"].(string), "http: panic serving") {
			break
		}
		rec = nil
	}
	if rec == nil || rec["level"] != "WARN" || !strings.Contains(rec["msg"].(string), "a bug in a handler") {
		t.Fatalf("net/http's complaint is not a warn line of the log: %v; log:\n%s", rec, out.String())
	}
}
