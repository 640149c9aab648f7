package upstreams

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/conformanceserver"
)

func TestWithElicitationDefaults(t *testing.T) {
	const params = `{"message":"m","requestedSchema":{"type":"object","properties":{
		"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},
		"nick":{"type":"string"},"none":{"type":"string","default":null}}}}`
	for _, c := range []struct{ name, result, want string }{
		{"accepted, empty", `{"action":"accept","content":{}}`, `{"action":"accept","content":{"age":30,"name":"John Doe"}}`},
		{"accepted without content", `{"action":"accept"}`, `{"action":"accept","content":{"age":30,"name":"John Doe"}}`},
		{"accepted, null content", `{"action":"accept","content":null}`, `{"action":"accept","content":{"age":30,"name":"John Doe"}}`},
		{"a given value stays", `{"action":"accept","content":{"name":"Jane","nick":"j"}}`, `{"action":"accept","content":{"age":30,"name":"Jane","nick":"j"}}`},
		{"a given null stays", `{"action":"accept","content":{"name":null}}`, `{"action":"accept","content":{"age":30,"name":null}}`},
		{"all given", `{"action":"accept","content":{"name":"Jane","age":7}}`, `{"action":"accept","content":{"name":"Jane","age":7}}`},
		{"declined", `{"action":"decline"}`, `{"action":"decline"}`},
		{"cancelled", `{"action":"cancel","content":{}}`, `{"action":"cancel","content":{}}`},
		{"content not an object", `{"action":"accept","content":[1]}`, `{"action":"accept","content":[1]}`},
		{"not an answer", `[]`, `[]`},
		{"other fields kept", `{"action":"accept","content":{},"_meta":{"k":1}}`, `{"_meta":{"k":1},"action":"accept","content":{"age":30,"name":"John Doe"}}`},
	} {
		if got := string(withElicitationDefaults(json.RawMessage(params), json.RawMessage(c.result))); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// A form without defaults, or a URL-mode elicitation, leaves the answer as sent.
	for _, p := range []string{`{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`,
		`{"mode":"url","url":"https://example.com","elicitationId":"e"}`, `not json`} {
		if got := string(withElicitationDefaults(json.RawMessage(p), json.RawMessage(`{"action":"accept","content":{}}`))); got != `{"action":"accept","content":{}}` {
			t.Errorf("%s: %s", p, got)
		}
	}
}

// acceptingRelay is a client that accepts every elicitation with the
// content it was given, leaving out the fields it did not touch.
type acceptingRelay struct {
	content string
	mu      sync.Mutex
	asked   []string
}

func (*acceptingRelay) Session() string { return "s" }
func (r *acceptingRelay) Request(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	r.mu.Lock()
	r.asked = append(r.asked, method)
	r.mu.Unlock()
	return json.RawMessage(`{"action":"accept","content":` + r.content + `}`), nil
}
func (*acceptingRelay) Log(json.RawMessage) {}

// The conformance upstream's SEP-1034 tool, through a client that accepts
// the form with one field changed and the others left out: the upstream
// gets the schema's defaults for those, in both eras (issue 17, item 8;
// the suite's elicitation-sep1034-client-defaults). On 9705eee it got only
// the field the client gave.
func TestElicitationDefaultsReachTheUpstream(t *testing.T) {
	handler := conformanceserver.NewHTTPHandler(conformanceserver.New())
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		_ = handler.Shutdown(context.Background())
		srv.Close()
	})
	for _, protocol := range []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20260728} {
		t.Run(protocol, func(t *testing.T) {
			ctx := callCtx(t, generous)
			conn, err := Dial(ctx, &Server{Name: "c", Transport: TransportHTTP, Egress: loopbackOK, URL: srv.URL + "/mcp", Protocol: protocol},
				1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			relay := &acceptingRelay{content: `{"name":"Jane"}`}
			raw, err := conn.CallTool(WithRelay(ctx, relay), "test_elicitation_sep1034_defaults", json.RawMessage(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			text := firstText(t, raw)
			_, content, ok := strings.Cut(text, "content=")
			if !ok {
				t.Fatalf("result %s", text)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(content), &got); err != nil {
				t.Fatalf("content %s: %v", content, err)
			}
			want := map[string]any{"name": "Jane", "age": 30.0, "score": 95.5, "status": "active", "verified": true}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (content %s)", k, got[k], v, content)
				}
			}
			relay.mu.Lock()
			defer relay.mu.Unlock()
			if len(relay.asked) != 1 || relay.asked[0] != string(mcp.MethodElicitationCreate) {
				t.Errorf("the client was asked %v", relay.asked)
			}
		})
	}
}
