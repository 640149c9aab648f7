package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// An upstream's request to the client (sampling, elicitation, roots)
// during a fast call is written on the call's own response, as an event
// before the answer, and the client answers it with a POST of a JSON-RPC
// response. The Streamable HTTP transport allows a server's request on the
// stream of the client request it relates to, and that is the one stream a
// client surely reads while its call runs: on its GET stream, where
// mcp-go's handler writes sampling and roots, a client that does not
// listen never sees them, and with mcp-go's event store the session's
// queue goes to whichever of the GET's pump and a call's forwarder takes
// it first (the same split as progress, issue 17).
//
// The request's id is toolgate's own ("tg-" and a counter, a string):
// mcp-go numbers its requests with integers, so an answer to one of its
// own never matches. The answer is taken only for the session whose call
// asked (the pending entry is keyed by session and id), and a session is
// its principal's: authenticate and bindSession, in front of the fast
// path, refuse a request that names another principal's session (404)
// before its body is read. Every other response goes to mcp-go as it is,
// which has its own pending requests for the calls it handles.

// askPrefix starts the ids of toolgate's own requests to clients.
const askPrefix = "tg-"

// maxClientAsks bounds the requests waiting for their clients' answers at
// once, over every session. Each waits within its call (whose context
// ends it), so this is only a backstop; maxSessionAsks keeps one session
// (one upstream fanning out questions, or one principal's calls) from
// taking all of it.
const (
	maxClientAsks  = 4096
	maxSessionAsks = 32
)

// clientAsks are the requests fast calls have put to their clients and
// not had answered. The zero value is ready.
type clientAsks struct {
	mu        sync.Mutex
	waiting   map[askKey]chan clientAnswer
	bySession map[string]int // how many of waiting each session has
	last      atomic.Uint64
}

// askKey names a waiting request: the session and toolgate's id for it.
type askKey struct{ session, id string }

// clientAnswer is a client's JSON-RPC response: its result, or its error.
type clientAnswer struct {
	result json.RawMessage
	err    *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

// errAsksFull is the answer for the upstream when too many requests wait.
var errAsksFull = errors.New("too many requests are waiting for their clients")

// ask puts method to the client of session on stream (the call's
// response) and waits for the client's answer or ctx's end (the call's).
// The answer's result is returned as the client sent it.
func (a *clientAsks) ask(ctx context.Context, stream *callStream, session, method string, params any) (json.RawMessage, error) {
	id := askPrefix + strconv.FormatUint(a.last.Add(1), 10)
	key := askKey{session, id}
	answered := make(chan clientAnswer, 1)
	if !a.open(key, answered) {
		return nil, errAsksFull
	}
	defer a.close(key)
	req := mcp.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Request: mcp.Request{Method: method}, Params: params}
	if !stream.send(req) {
		return nil, errors.New("the call's response is over or the client is not reading it")
	}
	select {
	case ans := <-answered:
		if ans.err != nil {
			return nil, fmt.Errorf("%s error %d: %s", method, ans.err.Code, ans.err.Message) // as mcp-go words a client's error
		}
		return ans.result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *clientAsks) open(key askKey, answered chan clientAnswer) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiting) >= maxClientAsks || a.bySession[key.session] >= maxSessionAsks {
		return false
	}
	if a.waiting == nil {
		a.waiting, a.bySession = map[askKey]chan clientAnswer{}, map[string]int{}
	}
	a.waiting[key] = answered
	a.bySession[key.session]++
	return true
}

func (a *clientAsks) close(key askKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.waiting[key]; !ok {
		return
	}
	delete(a.waiting, key)
	if a.bySession[key.session]--; a.bySession[key.session] <= 0 {
		delete(a.bySession, key.session)
	}
}

// pending is how many requests wait.
func (a *clientAsks) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

// answer delivers msg, a client's POSTed message on session, when it is
// the response to a request of toolgate's own waiting on that session, and
// reports whether it did.
func (a *clientAsks) answer(session string, msg *sideMessage) bool {
	if msg.Method != "" || len(msg.ID) == 0 || msg.ID[0] != '"' || (msg.Result == nil) == (msg.Error == nil) {
		return false
	}
	var id string
	if json.Unmarshal(msg.ID, &id) != nil || !strings.HasPrefix(id, askPrefix) {
		return false
	}
	var ans clientAnswer
	if msg.Error != nil {
		if json.Unmarshal(msg.Error, &ans.err) != nil || ans.err == nil {
			return false
		}
	} else {
		ans.result = msg.Result
	}
	a.mu.Lock()
	answered, ok := a.waiting[askKey{session, id}]
	delete(a.waiting, askKey{session, id})
	a.mu.Unlock()
	if ok {
		answered <- ans // room for one; the entry is gone, so never a second
	}
	return ok
}

// askClient is the direct relay's request: method's params as mcp-go
// sends them (req, already decoded into mcp-go's types), and the client's
// result decoded as mcp-go decodes it, so that the upstream gets the same
// on either path.
func askClient(r *clientRelay, method string, params any) (any, error) {
	raw, err := r.direct.asks.ask(r.ctx, r.direct, r.session, method, params)
	if err != nil {
		return nil, err
	}
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		var res mcp.CreateMessageResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("failed to unmarshal sampling response: %v", err)
		}
		content, err := mcp.ParseSamplingContent(res.Content)
		if err != nil {
			return nil, fmt.Errorf("failed to parse sampling response content: %w", err)
		}
		res.Content = content
		return &res, nil
	case string(mcp.MethodElicitationCreate):
		var res mcp.ElicitationResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("failed to unmarshal elicitation response: %v", err)
		}
		return &res, nil
	default:
		var res mcp.ListRootsResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("failed to unmarshal list roots response: %v", err)
		}
		return &res, nil
	}
}
