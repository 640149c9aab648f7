// Package overrides reshapes an upstream tool as the operator configured it
// (mcpServers.<server>.tools.<tool>.override): what clients see of it (its
// name, title, description, annotations and input schema) and what the
// upstream gets (its own name, and the client's arguments with the hidden
// parameters' fixed values set). A hidden or narrowed parameter is named
// by a path, top-level ("shop") or into nested objects ("options.dry_run").
//
// The catalog applies an override when it builds a tool (upstreams, catalog
// hook); an override that does not fit the upstream's schema (a parameter
// it does not declare, a path across an array or a combinator, a fixed
// value or an enum it would refuse) quarantines that tool with the reason,
// never the gateway. The validate link calls Applied.Check on each call's
// arguments, before the policy's conditions, so conditions, approvals,
// duplicate suppression, the audit trail and the upstream all see the
// final arguments.
package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/toolschema"
)

// Override is one tool's override, as config has it (config.ToolOverride,
// converted by the gateway so that upstreams does not import config).
type Override struct {
	Name              string  // the client-facing name, verbatim; "" keeps <prefix><tool>
	Title             *string // nil: the upstream's
	Description       *string // nil: the upstream's
	DescriptionAppend string  // added after the upstream's description
	// The annotation hints an override sets; nil keeps the upstream's.
	ReadOnlyHint, DestructiveHint, IdempotentHint, OpenWorldHint *bool
	Hide                                                         map[string]json.RawMessage // parameter -> its fixed JSON value
	Narrow                                                       map[string]json.RawMessage // parameter -> a JSON Schema fragment it must also satisfy
}

// Applied is an override checked against one upstream tool's input schema.
type Applied struct {
	Schema json.RawMessage    // the client-facing input schema
	Input  *toolschema.Schema // Schema, compiled: what clients are told; validate checks Check's result instead

	names []string           // the hidden parameters' paths, sorted
	fixed []fixedValue       // the hidden parameters with their values, in the order of names
	final *toolschema.Schema // the upstream's schema with the narrowings: what the final arguments must fit
}

// Hidden lists the hidden parameters' paths ("shop", "options.dry_run"), sorted.
func (a *Applied) Hidden() []string { return a.names }

// Apply checks o against the upstream's input schema and builds the
// client-facing schema: a hidden parameter leaves its object's properties
// and required; a narrowed one becomes {"allOf": [<the upstream's>, <the
// narrowing>]}, which accepts exactly what both accept. A path into a
// nested object rewrites the schema at that depth (paths.go says which
// schemas it can cross). The error says, for the quarantine, what in the
// override does not fit the upstream's schema.
func Apply(o *Override, inputSchema json.RawMessage) (*Applied, error) {
	upstream, err := toolschema.Compile(inputSchema, toolschema.Limits{})
	if err != nil {
		return nil, fmt.Errorf("the upstream's input schema: %w", err)
	}
	a := &Applied{Schema: inputSchema, Input: upstream, final: upstream}
	if len(o.Hide) == 0 && len(o.Narrow) == 0 {
		return a, nil
	}
	root, err := decodeObject(inputSchema)
	if err != nil {
		return nil, fmt.Errorf("the upstream's input schema: %w", err)
	}
	if err := a.fix(o.Hide, inputSchema); err != nil {
		return nil, err
	}
	if len(o.Narrow) > 0 {
		// The final arguments carry the hidden parameters: they must fit the
		// narrowings of the upstream's schema, hidden parameters and all.
		final, err := decodeObject(inputSchema)
		if err != nil {
			return nil, err
		}
		if err := narrowAll(final, o.Narrow, inputSchema); err != nil {
			return nil, err
		}
		if a.final, err = compileTree(final); err != nil {
			return nil, fmt.Errorf("the input schema with the narrowings: %w", err)
		}
	}
	// What clients see: hidden parameters removed first, so that narrowing
	// an object that holds one wraps the object as clients see it.
	for _, f := range a.fixed {
		s, err := locate(root, f.path, true)
		if err != nil {
			return nil, fmt.Errorf("override.hide.%s: %w", strings.Join(f.path, "."), err)
		}
		hide(s)
	}
	if err := narrowAll(root, o.Narrow, inputSchema); err != nil {
		return nil, err
	}
	pruneDefinitions(root)
	if a.Schema, err = json.Marshal(root); err != nil {
		return nil, err
	}
	if a.Input, err = toolschema.Compile(a.Schema, toolschema.Limits{}); err != nil {
		return nil, fmt.Errorf("the client-facing input schema: %w", err)
	}
	return a, nil
}

// fix checks each hidden parameter's path and fixed value against the
// upstream's schema, and keeps them for Check.
func (a *Applied) fix(hidden map[string]json.RawMessage, inputSchema json.RawMessage) error {
	for _, key := range sortedKeys(hidden) {
		root, err := decodeObject(inputSchema)
		if err != nil {
			return err
		}
		path := splitPath(root, key)
		s, err := locate(root, path, false)
		if err != nil {
			return fmt.Errorf("override.hide.%s: %w", key, err)
		}
		v := hidden[key]
		if err := fitsParameter(root, s.ptr, v); err != nil {
			return fmt.Errorf("override.hide.%s: the fixed value %s does not fit the upstream's schema for it: %w", key, v, err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return fmt.Errorf("override.hide.%s: %w", key, err)
		}
		a.fixed = append(a.fixed, fixedValue{path: path, value: c.Bytes()})
		a.names = append(a.names, strings.Join(path, "."))
	}
	return nil
}

// narrowAll wraps each narrowed parameter's schema in root, the deepest
// first, so that narrowing an object and one of its properties both apply.
func narrowAll(root map[string]any, narrow map[string]json.RawMessage, inputSchema json.RawMessage) error {
	keys := sortedKeys(narrow)
	slices.Reverse(keys)
	for _, key := range keys {
		pristine, err := decodeObject(inputSchema)
		if err != nil {
			return err
		}
		path := splitPath(pristine, key)
		at, err := locate(pristine, path, false)
		if err != nil {
			return fmt.Errorf("override.narrow.%s: %w", key, err)
		}
		frag, err := decodeObject(narrow[key])
		if err != nil {
			return fmt.Errorf("override.narrow.%s: %w", key, err)
		}
		if err := narrows(pristine, at.ptr, frag); err != nil {
			return fmt.Errorf("override.narrow.%s: %w", key, err)
		}
		s, err := locate(root, path, true)
		if err != nil {
			return fmt.Errorf("override.narrow.%s: %w", key, err)
		}
		props := s.parent["properties"].(map[string]any)
		props[s.name] = map[string]any{"allOf": []any{props[s.name], frag}}
	}
	return nil
}

// hide removes the parameter at s from its object's properties and required.
func hide(s site) {
	delete(s.parent["properties"].(map[string]any), s.name)
	req, ok := s.parent["required"].([]any)
	if !ok {
		return
	}
	req = slices.DeleteFunc(req, func(v any) bool { return v == s.name })
	if len(req) == 0 {
		delete(s.parent, "required")
	} else {
		s.parent["required"] = req
	}
}

func compileTree(root map[string]any) (*toolschema.Schema, error) {
	raw, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	return toolschema.Compile(raw, toolschema.Limits{})
}

// narrows checks what can be checked of a narrowing: the values it allows
// by enum or const must be values the upstream accepts for the parameter.
// The allOf makes any fragment a narrowing; this catches a narrowing that
// would allow only values the upstream refuses.
func narrows(root map[string]any, ptr string, frag map[string]any) error {
	var values []any
	if enum, ok := frag["enum"]; ok {
		list, ok := enum.([]any)
		if !ok || len(list) == 0 {
			return errors.New("enum must be a non-empty list")
		}
		values = list
	}
	if c, ok := frag["const"]; ok {
		values = append(values, c)
	}
	for _, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := fitsParameter(root, ptr, raw); err != nil {
			return fmt.Errorf("%s is not a value the upstream accepts for it: %w", raw, err)
		}
	}
	return nil
}

// valueKey names the one property of the instance fitsParameter validates.
const valueKey = "toolgate:value"

// fitsParameter validates value against the upstream's schema at ptr (a
// JSON pointer into root): the root schema reduced to the keywords
// references may point into, with one more property whose schema is a
// $ref to ptr, checked on {that property: value}. Nothing else of the root
// applies (its required, its other properties), and references inside the
// parameter's schema resolve as they do in the upstream's.
func fitsParameter(root map[string]any, ptr string, value json.RawMessage) error {
	doc := map[string]any{}
	for _, k := range []string{"$schema", "$id", "$anchor", "$dynamicAnchor", "$defs", "definitions"} {
		if v, ok := root[k]; ok {
			doc[k] = v
		}
	}
	props := map[string]any{}
	if orig, ok := root["properties"].(map[string]any); ok {
		maps.Copy(props, orig)
	}
	key := valueKey
	for props[key] != nil {
		key += "_"
	}
	props[key] = map[string]any{"$ref": fragment(ptr)}
	doc["properties"] = props
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	s, err := toolschema.Compile(raw, toolschema.Limits{})
	if err != nil {
		return fmt.Errorf("the parameter's schema cannot be checked on its own: %w", err)
	}
	k, _ := json.Marshal(key)
	return s.Validate(json.RawMessage(`{` + string(k) + `:` + string(value) + `}`))
}

// Check makes the final arguments of a call: the client's, with each
// hidden parameter set to the operator's value at its path (a value the
// client sent there is dropped: the operator's always wins), checked
// against the upstream's schema with the narrowings. The client's bytes
// stay as sent elsewhere. Every error is a *toolschema.Violation, whose
// message names only what the client sent.
func (a *Applied) Check(args json.RawMessage) (json.RawMessage, error) {
	if len(a.fixed) == 0 {
		return args, a.final.ValidateArguments(args)
	}
	out := bytes.TrimSpace(args)
	if len(out) == 0 || string(out) == "null" {
		out = []byte("{}")
	}
	for _, f := range a.fixed {
		var err error
		if out, err = setPath(out, f.path, f.value); err != nil {
			return nil, &toolschema.Violation{Message: err.Error()}
		}
	}
	if err := a.final.ValidateArguments(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Describe is the client-facing description, from the upstream's
// (already sanitised and scanned).
func (o *Override) Describe(upstream string) string {
	switch {
	case o.Description != nil:
		return *o.Description
	case o.DescriptionAppend == "":
		return upstream
	case upstream == "":
		return o.DescriptionAppend
	}
	return upstream + "\n\n" + o.DescriptionAppend
}

// Annotate is the client-facing annotations: the upstream's, with each
// hint the override sets replaced.
func (o *Override) Annotate(a mcp.ToolAnnotation) mcp.ToolAnnotation {
	for _, h := range []struct{ dst, src **bool }{
		{&a.ReadOnlyHint, &o.ReadOnlyHint}, {&a.DestructiveHint, &o.DestructiveHint},
		{&a.IdempotentHint, &o.IdempotentHint}, {&a.OpenWorldHint, &o.OpenWorldHint},
	} {
		if *h.src != nil {
			*h.dst = *h.src
		}
	}
	return a
}

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("expected a JSON object")
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
