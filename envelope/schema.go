package envelope

import (
	"encoding/json"
	"strings"
)

// OutputSchema returns the outputSchema advertised for a proxied tool: it
// describes the envelope, with the upstream's own output schema (if any)
// under "data". SDK clients validate structuredContent against it, so it
// must accept both a success and a failure envelope.
//
// The upstream schema is nested under properties.data, which moves its root.
// Its top-level $defs/definitions are hoisted to our root so the common
// "#/$defs/x" refs keep resolving. Any other local ref (for example "#" or
// "#/properties/...") would point somewhere else once nested, so such a
// schema is replaced by {} (any data) rather than advertised wrongly.
func OutputSchema(upstream json.RawMessage) json.RawMessage {
	data, hoisted := nestable(upstream)
	if data == nil {
		data = map[string]any{}
	} else {
		data = map[string]any{"anyOf": []any{data, map[string]any{"type": "null"}}}
	}
	nullableString := map[string]any{"type": []any{"string", "null"}}
	root := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"ok":         map[string]any{"type": "boolean"},
			"data":       data,
			"error_code": nullableString,
			"message":    nullableString,
			"retryable":  map[string]any{"type": "boolean"},
			"replayed":   map[string]any{"type": "boolean"},
		},
		"required": []any{"ok", "data", "error_code", "message", "retryable"},
	}
	for k, v := range hoisted {
		root[k] = v
	}
	out, err := json.Marshal(root)
	if err != nil { // cannot happen: every value came from json.Unmarshal or literals
		panic(err)
	}
	return out
}

// nestable decodes an upstream output schema and splits off its definition
// tables. It returns nil when the schema is absent, not an object, or uses
// refs that nesting would break.
func nestable(upstream json.RawMessage) (map[string]any, map[string]any) {
	if len(upstream) == 0 {
		return nil, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(upstream, &schema); err != nil || schema == nil {
		return nil, nil
	}
	if !refsSurviveNesting(schema) {
		return nil, nil
	}
	hoisted := map[string]any{}
	for _, k := range []string{"$defs", "definitions"} {
		if v, ok := schema[k]; ok {
			hoisted[k] = v
			delete(schema, k)
		}
	}
	// $schema and $id are only meaningful at a document root.
	delete(schema, "$schema")
	delete(schema, "$id")
	return schema, hoisted
}

func refsSurviveNesting(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if k == "$ref" || k == "$dynamicRef" {
				ref, _ := child.(string)
				if !strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
					return false
				}
			}
			if !refsSurviveNesting(child) {
				return false
			}
		}
	case []any:
		for _, child := range t {
			if !refsSurviveNesting(child) {
				return false
			}
		}
	}
	return true
}
