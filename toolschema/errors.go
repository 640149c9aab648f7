package toolschema

import "fmt"

// Rejected is returned by [Compile] when an upstream schema is refused. Reason
// is meant for an operator (for example in `toolgate check`): it says what
// was wrong and where, and never contains internal schema URLs.
type Rejected struct {
	Reason string
}

func (e *Rejected) Error() string { return "schema rejected: " + e.Reason }

func rejectf(format string, args ...any) *Rejected {
	return &Rejected{Reason: fmt.Sprintf(format, args...)}
}

// Violation is returned when an instance does not satisfy a schema. Message
// is meant for a model: it names the field(s) and what was expected.
type Violation struct {
	// Path is the JSON pointer of the (first) failing field in the instance,
	// e.g. "/order_id"; "" is the instance itself.
	Path string
	// Message is short (at most maxMessageLen bytes), e.g.
	// `field "order_id": expected integer, got string`.
	Message string
}

func (v *Violation) Error() string { return v.Message }
