// Package envelope is the one shape every tools/call answer takes, and the one
// typed error the pipeline uses to produce a failed answer.
//
// The code table below is the only place that decides whether a failure is
// retryable: callers never match on message strings. Two codes (tool_timeout,
// upstream_error) depend on the tool being retry-safe; the table says so and
// Error.Retryable takes that fact as an argument instead of guessing.
package envelope

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonwrite"
)

// Code is a stable, snake_case error code documented in the README.
type Code string

// The fixed set of error codes. Adding one means adding a row to table and to
// the README's error-code table.
const (
	ToolNotFound        Code = "tool_not_found"
	ToolNotAllowed      Code = "tool_not_allowed"
	InvalidArguments    Code = "invalid_arguments"
	ApprovalRequired    Code = "approval_required"
	ApprovalDenied      Code = "approval_denied"
	RateLimited         Code = "rate_limited"
	UpstreamUnavailable Code = "upstream_unavailable"
	ToolTimeout         Code = "tool_timeout"
	UpstreamError       Code = "upstream_error"
	ToolFailed          Code = "tool_failed"
	ResultTooLarge      Code = "result_too_large"
	InvalidResult       Code = "invalid_result"
	ToolChanged         Code = "tool_changed"
	// DuplicateCall: an identical call ran within the duplicate-suppression window, and its answer
	// was not kept for replay (too large, or pushed out by newer answers under
	// limits.dedup.max_bytes), so the call is not run a second time. A new idempotency key runs it
	// deliberately.
	DuplicateCall Code = "duplicate_call"
	// AuthorizationRequired: the upstream acts as the calling user (auth mode oauth or per_user) and
	// holds no credential of this caller's yet; the message carries the gateway URL where the user
	// connects, after which the same call succeeds.
	AuthorizationRequired Code = "authorization_required"
	// InsufficientScope: the caller's access token lacks an OAuth scope the policy's scope lines
	// require for this tool; the message names the scopes. Over Streamable HTTP the answer is HTTP
	// 403 with an insufficient_scope challenge instead, whenever the response has not started.
	InsufficientScope Code = "insufficient_scope"
	InternalError     Code = "internal_error"
)

// retryPolicy says whether the same call may succeed if repeated.
type retryPolicy int

const (
	never       retryPolicy = iota
	always                  // the call never reached the tool, or was refused only for now
	ifRetrySafe             // the outcome is unknown: repeating is safe only for retry-safe tools
)

var table = map[Code]retryPolicy{
	ToolNotFound:        never,
	ToolNotAllowed:      never,
	InvalidArguments:    never,
	ApprovalRequired:    always,
	ApprovalDenied:      never,
	RateLimited:         always,
	UpstreamUnavailable: always,
	ToolTimeout:         ifRetrySafe,
	UpstreamError:       ifRetrySafe,
	ToolFailed:          never,
	ResultTooLarge:      never,
	InvalidResult:       never,
	ToolChanged:         never,
	// Not retryable: the operation ran; repeating it unchanged within the window gets the same answer.
	DuplicateCall: never,
	// Retryable because the caller can fix it (connect at the URL) and repeat the call unchanged.
	AuthorizationRequired: always,
	// Not retryable: the same call with the same token fails the same way. A client steps up on the
	// HTTP 403, not on this envelope.
	InsufficientScope: never,
	InternalError:     never,
}

// Known reports whether c is in the code table.
func (c Code) Known() bool { _, ok := table[c]; return ok }

// Retryable reports whether a call that failed with c may succeed when
// repeated unchanged. retrySafe says whether the tool is retry-safe (see
// docs/design.md, Failure semantics); it matters only for codes whose
// outcome is unknown.
func (c Code) Retryable(retrySafe bool) bool {
	switch table[c] {
	case always:
		return true
	case ifRetrySafe:
		return retrySafe
	default:
		return false
	}
}

// Error is the pipeline's typed failure. Message is written for the model
// and must never carry internal detail (stacks, file paths, policy text);
// Detail is for logs and audit only and never reaches a client.
type Error struct {
	Code    Code
	Message string
	Detail  string
}

// Errorf builds an Error with a formatted client-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetail returns a copy of e carrying an internal detail for the log.
func (e *Error) WithDetail(detail string) *Error {
	c := *e
	c.Detail = detail
	return &c
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Envelope is the structuredContent of every tools/call answer.
type Envelope struct {
	OK        bool            `json:"ok"`
	Data      json.RawMessage `json:"data"`
	ErrorCode *Code           `json:"error_code"`
	Message   *string         `json:"message"`
	Retryable bool            `json:"retryable"`
	// Replayed marks an answer recorded from an identical earlier call and
	// given again instead of running the tool twice (duplicate
	// suppression); absent otherwise.
	Replayed bool `json:"replayed,omitempty"`
}

// Success wraps data (raw JSON; nil means null).
func Success(data json.RawMessage) Envelope {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return Envelope{OK: true, Data: data}
}

// Encoded is an envelope as json.Marshal writes it: one valid JSON value,
// compact and HTML-escaped. What writes the answer copies it as it is,
// where a json.RawMessage from elsewhere is checked and compacted first
// (with 50 callers pulling 5 MiB results, that check took a fifth of the
// gateway's CPU). Only Encode, SuccessJSON and SuccessText make one: its
// bytes are unexported, so no other package can wrap bytes of its own (an
// upstream's) and have them sent unchecked. The zero value is null.
type Encoded struct{ b []byte }

// Bytes is the encoded envelope (nil for the zero value), not to be
// modified.
func (e Encoded) Bytes() []byte { return e.b }

// MarshalJSON is the envelope itself (null when empty), for encoders that
// do not know the type (mcp-go's).
func (e Encoded) MarshalJSON() ([]byte, error) {
	if len(e.b) == 0 {
		return []byte("null"), nil
	}
	return e.b, nil
}

// RawOf is the JSON of a result's structuredContent when it is an Encoded
// (trusted: true) or a json.RawMessage (to check); nil for anything else.
func RawOf(structured any) (raw []byte, trusted bool) {
	switch s := structured.(type) {
	case Encoded:
		return s.b, true
	case json.RawMessage:
		return s, false
	}
	return nil, false
}

// Encode is json.Marshal(e); it panics when e.Data is not valid JSON,
// which no envelope the gateway builds holds.
func Encode(e Envelope) Encoded {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return Encoded{b}
}

// The bytes json.Marshal writes around a success's data.
const (
	successHead = `{"ok":true,"data":`
	successTail = `,"error_code":null,"message":null,"retryable":false}`
)

// SuccessJSON is json.Marshal(Success(data)), written into one buffer of
// its final size: a large result's data is copied once, not grown in
// encoding/json's pooled buffer, copied out, and compacted on the way (a
// 5 MiB text took 8 MiB held in that pool and another 5 MiB copy). It
// fails, as json.Marshal would, when data is not one JSON value.
func SuccessJSON(data json.RawMessage) (Encoded, error) {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	buf := append(make([]byte, 0, len(successHead)+len(data)+len(successTail)), successHead...)
	buf, err := jsonwrite.AppendRaw(buf, data)
	if err != nil {
		return Encoded{}, err
	}
	return Encoded{append(buf, successTail...)}, nil
}

// SuccessText is SuccessJSON of text quoted as a JSON string, written in
// one pass into a buffer of its final size, without checking again what
// it wrote.
func SuccessText(text string) Encoded {
	buf := make([]byte, 0, len(successHead)+jsonwrite.StringLen(text)+len(successTail))
	buf = jsonwrite.AppendString(append(buf, successHead...), text)
	return Encoded{append(buf, successTail...)}
}

// Failure builds the envelope for e; retrySafe is the tool's retry safety.
func Failure(e *Error, retrySafe bool) Envelope {
	code, msg := e.Code, e.Message
	return Envelope{
		OK:        false,
		Data:      json.RawMessage("null"),
		ErrorCode: &code,
		Message:   &msg,
		Retryable: code.Retryable(retrySafe),
	}
}
