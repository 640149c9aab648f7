package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestAnswerPrefix(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}`:              true,
		`{"jsonrpc":"2.0","id":"a\"b,\\","error":{"code":-1,"message":"m"}}`: true,
		` { "jsonrpc" : "2.0" , "id" : 3 , "result" : {} }`:                  true,
		`{"result":{}}`: true,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"result":1}}`:          false,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                        false,
		`{"jsonrpc":"2.0","params":{"result":1},"method":"x"}`:                          false, // nested: cannot tell
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("x", answerSniff) + `","result":{}}`: false,
		`{"jsonrpc":"2.0","\u0072esult":{}}`:                                            false,
		`[{"jsonrpc":"2.0","id":3,"result":{}}]`:                                        false,
		`{"jsonrpc":"2.0","id":3`:                                                       false,
		``:                                                                              false,
	} {
		b := []byte(body)
		if len(b) > answerSniff {
			b = b[:answerSniff]
		}
		if got := answerPrefix(b); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// What mcp-go sends: its answers are answers, its requests and
// notifications are not, and a GET or a body GetBody cannot give again is
// not read.
func TestIsAnswer(t *testing.T) {
	post := func(v any) *http.Request {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://u/mcp", bytes.NewReader(b))
		return req
	}
	id := mcp.NewRequestId(int64(7))
	answers := []*http.Request{
		post(transport.JSONRPCResponse{JSONRPC: "2.0", ID: id, Result: json.RawMessage(`{"action":"accept"}`)}),
		post(transport.NewJSONRPCErrorResponse(mcp.NewRequestId("s-1"), mcp.INTERNAL_ERROR, "no", nil)),
	}
	others := []*http.Request{
		post(transport.JSONRPCRequest{JSONRPC: "2.0", ID: id, Method: "tools/call", Params: map[string]any{"name": "t"}}),
		post(mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/initialized"}}),
	}
	get, _ := http.NewRequest(http.MethodGet, "http://u/mcp", nil)
	unread, _ := http.NewRequest(http.MethodPost, "http://u/mcp", strings.NewReader(`{"result":{}}`))
	unread.GetBody = nil
	others = append(others, get, unread)
	for _, req := range answers {
		if !isAnswer(req) {
			t.Errorf("an answer taken for a request: %+v", req)
		}
	}
	for _, req := range others {
		if isAnswer(req) {
			t.Errorf("not an answer, yet taken for one: %+v", req)
		}
	}
	// The body itself is left as it was.
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(answers[0].Body)
	if !strings.HasPrefix(buf.String(), `{"jsonrpc":"2.0","id":7,"result"`) {
		t.Errorf("body %q", buf.String())
	}
}

// isAnswer runs on every POST to an HTTP upstream: a call's costs it
// next to one of its round trips (BenchmarkConnCallTool).
func BenchmarkIsAnswer(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"k":"` + strings.Repeat("v", 1024) + `"}}}`)
	req, _ := http.NewRequest(http.MethodPost, "http://u/mcp", bytes.NewReader(body))
	b.ReportAllocs()
	for b.Loop() {
		if isAnswer(req) {
			b.Fatal("a request taken for an answer")
		}
	}
}

// blockingTransport holds every request until its context ends.
type blockingTransport struct{ started chan struct{} }

func (b blockingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b.started <- struct{}{}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// An answer sent without its caller's cancellation still ends when its
// connection does (Conn.Close), as mcp-go's own cancellation made it.
func TestAnswerEndsWithItsConnection(t *testing.T) {
	life, end := context.WithCancel(context.Background())
	defer end()
	base := blockingTransport{started: make(chan struct{}, 1)}
	tr := &cappedTransport{base: base, max: 1 << 20, onOversize: func([]byte) {}, life: life}
	req, err := http.NewRequest(http.MethodPost, "http://upstream.invalid/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	<-base.started
	end() // the connection closes
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("answer: %v, want cancelled with its connection", err)
		}
	case <-time.After(answerTimeout / 2):
		t.Fatal("an answer outlived its connection")
	}
}
