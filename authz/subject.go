package authz

import "encoding/json"

// Subject is who asks, as established by the credential: the principal
// (API key owner, JWT subject or the stdio principal), roles the credential
// itself grants for this request (a JWT roles claim; added to the roles the
// policy's g lines give), and attributes conditions may read
// (principal.<name>): API-key attributes from config or JWT claims.
type Subject struct {
	Principal string
	Roles     []string
	Attrs     map[string]string
}

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
