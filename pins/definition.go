package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/toolgate/toolgate/canonjson"
)

// Definition is everything about a tool that a model reads or that changes
// what a call means: what is pinned. Name is the upstream's own tool name.
// The raw fields are JSON as the upstream sent it; empty and null are the
// same (no such field).
type Definition struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
}

// HashPrefix starts every hash, so the algorithm is named in the lock file.
const HashPrefix = "sha256:"

// Canonical is the definition as canonical JSON: an object with exactly the
// keys annotations, description, inputSchema, name, outputSchema and title,
// objects' keys sorted (by UTF-8 bytes, i.e. by code point) at every level,
// no insignificant whitespace, strings with only the escapes JSON requires
// (", \ and control characters; everything else literal), and numbers by
// exact value (1, 1.0, 10e-1 and 1E0 are all written 1): each raw field is
// canonjson.Canonical of it. Missing schemas and annotations are null.
//
// It fails on invalid JSON, invalid UTF-8, lone surrogate escapes, duplicate
// keys and nesting deeper than 256: a definition that parsers could read in
// two ways cannot be pinned to one meaning.
func (d Definition) Canonical() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"annotations":`)
	if err := writeRawField(&b, "annotations", d.Annotations); err != nil {
		return nil, err
	}
	b.WriteString(`,"description":`)
	if err := writeStringField(&b, "description", d.Description); err != nil {
		return nil, err
	}
	b.WriteString(`,"inputSchema":`)
	if err := writeRawField(&b, "inputSchema", d.InputSchema); err != nil {
		return nil, err
	}
	b.WriteString(`,"name":`)
	if err := writeStringField(&b, "name", d.Name); err != nil {
		return nil, err
	}
	b.WriteString(`,"outputSchema":`)
	if err := writeRawField(&b, "outputSchema", d.OutputSchema); err != nil {
		return nil, err
	}
	b.WriteString(`,"title":`)
	if err := writeStringField(&b, "title", d.Title); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Hash is "sha256:" and the lowercase hex SHA-256 of Canonical.
func (d Definition) Hash() (string, error) {
	c, err := d.Canonical()
	if err != nil {
		return "", err
	}
	return hashOf(c), nil
}

func hashOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return HashPrefix + hex.EncodeToString(sum[:])
}

func writeStringField(b *bytes.Buffer, field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: not valid UTF-8", field)
	}
	b.Write(canonjson.AppendString(b.AvailableBuffer(), s))
	return nil
}

func writeRawField(b *bytes.Buffer, field string, raw json.RawMessage) error {
	if isNullRaw(raw) {
		b.WriteString("null")
		return nil
	}
	c, err := canonjson.Canonical(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	b.Write(c)
	return nil
}

// isNullRaw: an absent field and an explicit null mean the same.
func isNullRaw(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// ParseDefinition reads a definition back from its canonical JSON (as kept
// in the lock file). It accepts any JSON object with those keys.
func ParseDefinition(canonical []byte) (Definition, error) {
	var f struct {
		Name         *string         `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Definition{}, fmt.Errorf("definition: %w", err)
	}
	if f.Name == nil || *f.Name == "" {
		return Definition{}, errors.New("definition: no name")
	}
	d := Definition{Name: *f.Name, Title: f.Title, Description: f.Description}
	for _, p := range []struct {
		dst *json.RawMessage
		raw json.RawMessage
	}{{&d.InputSchema, f.InputSchema}, {&d.OutputSchema, f.OutputSchema}, {&d.Annotations, f.Annotations}} {
		if !isNullRaw(p.raw) {
			*p.dst = p.raw
		}
	}
	return d, nil
}
