package authz

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Subject is who asks, as established by the credential: the principal
// (API key owner, JWT subject or the stdio principal), roles the credential
// itself grants for this request (a JWT roles claim; added to the roles the
// policy's g lines give), and attributes conditions may read
// (principal.<name>): API-key attributes from config or JWT claims.
type Subject struct {
	Principal string
	Roles     []string
	Attrs     map[string]string
	// Scoped is true when the credential is an OAuth access token (a JWT), whose Scopes limit what
	// it may do: a request then needs every scope the policy's s lines name for it
	// ([Policy.CheckScopes]). False for API keys, stdio and anonymous callers, which carry no
	// scopes and are not limited by s lines.
	Scoped bool
	// Scopes are the token's scopes (its scope or scp claim), sorted, without duplicates; nil
	// when the token has none or the credential is not a token.
	Scopes []string
	// Bearer is the caller's inbound JWT as presented, kept only so that an upstream with auth mode
	// token_exchange can exchange it (upstreams/credentials); "" for every other credential (an API
	// key is never kept). It prints, logs and marshals redacted: Reveal is the one way to read it.
	Bearer Secret
}

// Secret is a credential that must never reach a log, an audit record, a metric or a client: every
// way of printing or encoding it gives "[redacted]" (or "" in JSON), and Reveal is the one way to read
// it, for the code that sends it where it belongs.
type Secret string

// Reveal is the secret itself.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) redacted() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// String, GoString, Format, LogValue, MarshalText and MarshalJSON keep the value out of every output.
func (s Secret) String() string               { return s.redacted() }
func (s Secret) GoString() string             { return `"` + s.redacted() + `"` }
func (s Secret) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(s.redacted())) }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(s.redacted()) }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.redacted()), nil }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`""`), nil }

// Request is one authorization question.
type Request struct {
	Subject Subject
	Object  string          // canonical <server>/<tool>
	Action  string          // ActCall
	Args    json.RawMessage // the validated arguments; nil when asking about visibility
}

// Decision is the answer. Internal is for the log only: it may carry stacks
// or file paths and must never reach a client.
type Decision struct {
	Allowed  bool
	Internal error
	// Rule is "file:line" of the policy line that decided a denial or an
	// allowance when known, for the log and the audit record.
	Rule string
	// CondErr is the first argument condition that could not be evaluated
	// (a missing argument, a wrong type), for the log. The line it belongs
	// to failed closed: an allow line did not apply, a deny line did.
	CondErr error
}
