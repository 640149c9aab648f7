package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxInstanceDepth bounds nesting in instances. The validator recurses once
// per level of a recursive schema; a cap keeps a hostile 1 MB "[[[[..." from
// turning into a million stack frames.
const maxInstanceDepth = 256

// Validate checks raw JSON instance bytes against s and returns nil or a
// *Violation. Numbers are decoded as json.Number, never float64, so
// integers above 2^53 are compared exactly.
func (s *Schema) Validate(instance json.RawMessage) error {
	v, err := decode(instance, decodeLimits{maxDepth: maxInstanceDepth})
	if err != nil {
		return decodeViolation(err, "value is not valid JSON")
	}
	return s.validate(v)
}

// ValidateArguments is Validate for tools/call arguments: absent or null
// arguments mean {} (MCP clients omit them for parameterless tools), and
// anything that is not an object is a Violation before the schema is
// consulted.
func (s *Schema) ValidateArguments(args json.RawMessage) error {
	v, err := decodeArguments(args)
	if err != nil {
		return err
	}
	return s.validate(v)
}

func decodeArguments(args json.RawMessage) (any, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, nil
	}
	if m, ok := decodeUsual(trimmed); ok {
		return m, nil
	}
	v, err := decode(trimmed, decodeLimits{maxDepth: maxInstanceDepth, foldKeys: true})
	if err != nil {
		return nil, decodeViolation(err, "arguments are not valid JSON")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &Violation{Message: "arguments must be a JSON object, got " + jsonType(v)}
	}
	return v, nil
}

func (s *Schema) validate(v any) error {
	err := s.js.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return describe(ve, v)
	}
	return &Violation{Message: "does not match the schema"}
}

// decodeViolation words a decoding failure for a model; notJSON is the
// phrase for a syntax error ("arguments are not valid JSON").
func decodeViolation(err error, notJSON string) *Violation {
	var de *decodeError
	if !errors.As(err, &de) {
		return &Violation{Message: notJSON}
	}
	var d describer
	var msg string
	switch de.kind {
	case errDepth:
		msg = d.subject(de.path) + fmt.Sprintf("nested more than %d levels deep", maxInstanceDepth)
	case errDuplicateKey:
		msg = "field " + d.name(de.path) + " appears more than once"
	case errCaseDuplicateKey:
		msg = "field " + d.name(de.path) + " appears more than once (field names that differ only in letter case are the same field)"
	case errNumber:
		msg = d.subject(de.path) + "number " + de.detail + " is out of the supported range"
	default:
		msg = notJSON + ": " + de.detail
	}
	return &Violation{Path: de.path.pointer(), Message: truncate(msg, maxMessageLen)}
}
