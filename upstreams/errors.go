package upstreams

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Where says how far a call got before it failed: the fact the breaker and
// the retry rules depend on.
type Where int

const (
	// NotSent: the request never left the gateway, so the tool did not run.
	NotSent Where = iota
	// Sent: the request left; the transport then broke or the reply was
	// not a valid answer. The tool may or may not have run.
	Sent
	// Answered: the upstream answered with a JSON-RPC error.
	Answered
)

func (w Where) String() string {
	switch w {
	case NotSent:
		return "not sent"
	case Sent:
		return "sent"
	default:
		return "answered"
	}
}

// CallError is every failure of an upstream request other than the
// caller's context ending first.
type CallError struct {
	Where    Where
	Oversize bool                     // the answer was over the size cap (Where is Answered)
	RPC      *mcp.JSONRPCErrorDetails // the upstream's JSON-RPC error, when Answered
	Err      error
	// Fault, when not 0, names the one fault of the connection that failed this request together with
	// every other request waiting on it (a stdio line that names no waiting request, the child's output
	// ending): they all carry the same Fault, so the breaker counts the fault once (breaker.Fault).
	Fault uint64
}

// faults numbers the connection faults that fail several requests at once (CallError.Fault).
var faults atomic.Uint64

// newFault is the id of a new connection fault: nonzero, and above every earlier one.
func newFault() uint64 { return faults.Add(1) }

func (e *CallError) Error() string {
	switch {
	case e.Oversize:
		return "upstream answer over the size cap"
	case e.RPC != nil:
		return fmt.Sprintf("upstream error %d: %s", e.RPC.Code, e.RPC.Message)
	}
	return fmt.Sprintf("upstream call %s: %v", e.Where, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// NotSent, Answered and TooLarge say where the call failed, for
// breaker.Classify (breaker.Located).
func (e *CallError) NotSent() bool  { return e.Where == NotSent }
func (e *CallError) Answered() bool { return e.Where == Answered }
func (e *CallError) TooLarge() bool { return e.Oversize }

// FaultID is the connection fault that failed the request with others (breaker.Fault), 0 when none.
func (e *CallError) FaultID() uint64 { return e.Fault }

// RateLimitedError is an HTTP upstream's refusal of a request for its rate
// limit or load: HTTP 429, or 503 with a Retry-After. The upstream did not
// process the request. It implements breaker.RateLimitError, so the attempt
// is classified rate_limited (no breaker failure), and a retry-safe tool is
// repeated only after After.
type RateLimitedError struct {
	Status int           // 429 or 503
	After  time.Duration // the upstream's Retry-After; 0 when it named none
}

func (e *RateLimitedError) Error() string {
	msg := fmt.Sprintf("upstream answered HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.After > 0 {
		msg += fmt.Sprintf(" (Retry-After %s)", e.After)
	}
	return msg
}

// RetryAfter is the wait the upstream asked for (breaker.RateLimitError).
func (e *RateLimitedError) RetryAfter() time.Duration { return e.After }

// ErrNotConnected is the cause when a server has no live connection.
var ErrNotConnected = errors.New("upstream not connected")

// KnownDown reports whether err is a call the gateway refused itself
// because it already knew the server's connection was down (not started
// yet, restarting after a crash, reconnecting): a NotSent CallError caused
// by ErrNotConnected. Such a refusal is no news about the upstream: its
// supervisor saw the connection go down and governs when it is tried
// again (its backoff). A request that failed on a connection thought to be
// up (a dial refused, a session the server forgot) is not KnownDown.
func KnownDown(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Where == NotSent && errors.Is(ce.Err, ErrNotConnected)
}

// neverLeft reports whether err proves the request was not delivered:
// the connection could not be made, or the server no longer knows the
// session (HTTP 404) and so did not process it.
func neverLeft(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, transport.ErrSessionTerminated)
}

// rpcError turns an upstream JSON-RPC error response into a CallError.
func rpcError(details *mcp.JSONRPCErrorDetails) *CallError {
	return &CallError{Where: Answered, RPC: details, Err: errors.New(details.Message)}
}

// malformed reports a reply that is not valid for the method.
func malformed(what string, raw json.RawMessage, err error) *CallError {
	return &CallError{Where: Sent, Err: fmt.Errorf("malformed %s (%d bytes): %w", what, len(raw), err)}
}
