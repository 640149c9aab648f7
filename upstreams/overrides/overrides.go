// Package overrides reshapes an upstream tool as the operator configured it
// (mcpServers.<server>.tools.<tool>.override): what clients see of it (its
// name, title, description, annotations and input schema) and what the
// upstream gets (its own name, and the client's arguments with the hidden
// parameters' fixed values added).
//
// The catalog applies an override when it builds a tool (upstreams, catalog
// hook); an override that does not fit the upstream's schema (a parameter it
// does not declare, a fixed value or an enum it would refuse) quarantines
// that tool with the reason, never the gateway. The validate link calls
// Applied.Inject on each call's validated arguments, before the policy's
// conditions, so conditions, approvals, duplicate suppression, the audit
// trail and the upstream all see the final arguments.
package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	Input  *toolschema.Schema // Schema, compiled: what validate checks a call against

	hidden   map[string]bool
	names    []string           // the hidden parameters, sorted
	fixed    []byte             // `"a":1,"b":"x"`: the hidden parameters with their values, sorted
	upstream *toolschema.Schema // the upstream's own input schema: the final arguments must fit it
}

// Hidden lists the hidden parameters, sorted.
func (a *Applied) Hidden() []string { return a.names }

// Apply checks o against the upstream's input schema and builds the
// client-facing schema: hidden parameters leave properties and required; a
// narrowed one becomes {"allOf": [<the upstream's>, <the narrowing>]},
// which accepts exactly what both accept. The error says, for the
// quarantine, what in the override does not fit the upstream's schema.
func Apply(o *Override, inputSchema json.RawMessage) (*Applied, error) {
	upstream, err := toolschema.Compile(inputSchema, toolschema.Limits{})
	if err != nil {
		return nil, fmt.Errorf("the upstream's input schema: %w", err)
	}
	a := &Applied{Schema: inputSchema, Input: upstream, upstream: upstream, hidden: map[string]bool{}}
	if len(o.Hide) == 0 && len(o.Narrow) == 0 {
		return a, nil
	}
	root, err := decodeObject(inputSchema)
	if err != nil {
		return nil, fmt.Errorf("the upstream's input schema: %w", err)
	}
	props, _ := root["properties"].(map[string]any)
	declared := func(p string) (any, error) {
		s, ok := props[p]
		if !ok {
			return nil, fmt.Errorf("parameter %q is not in the upstream's input schema (its parameters: %s)", p, strings.Join(sortedKeys(props), ", "))
		}
		return s, nil
	}
	var fixed [][]byte
	for _, p := range sortedKeys(o.Hide) {
		if _, err := declared(p); err != nil {
			return nil, fmt.Errorf("override.hide: %w", err)
		}
		v := o.Hide[p]
		if err := fitsParameter(root, p, v); err != nil {
			return nil, fmt.Errorf("override.hide.%s: the fixed value %s does not fit the upstream's schema for it: %w", p, v, err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, fmt.Errorf("override.hide.%s: %w", p, err)
		}
		k, _ := json.Marshal(p)
		fixed = append(fixed, append(append(k, ':'), c.Bytes()...))
		a.hidden[p] = true
		a.names = append(a.names, p)
	}
	for _, p := range sortedKeys(o.Narrow) {
		orig, err := declared(p)
		if err != nil {
			return nil, fmt.Errorf("override.narrow: %w", err)
		}
		frag, err := decodeObject(o.Narrow[p])
		if err != nil {
			return nil, fmt.Errorf("override.narrow.%s: %w", p, err)
		}
		if err := narrows(root, p, frag); err != nil {
			return nil, fmt.Errorf("override.narrow.%s: %w", p, err)
		}
		props[p] = map[string]any{"allOf": []any{orig, frag}}
	}
	for _, p := range a.names {
		delete(props, p)
	}
	if req, ok := root["required"].([]any); ok {
		req = slices.DeleteFunc(req, func(v any) bool { s, _ := v.(string); return a.hidden[s] })
		if len(req) == 0 {
			delete(root, "required")
		} else {
			root["required"] = req
		}
	}
	a.fixed = bytes.Join(fixed, []byte{','})
	if a.Schema, err = json.Marshal(root); err != nil {
		return nil, err
	}
	if a.Input, err = toolschema.Compile(a.Schema, toolschema.Limits{}); err != nil {
		return nil, fmt.Errorf("the client-facing input schema: %w", err)
	}
	return a, nil
}

// narrows checks what can be checked of a narrowing: the values it allows
// by enum or const must be values the upstream accepts for the parameter.
// The allOf makes any fragment a narrowing; this catches a narrowing that
// would allow only values the upstream refuses.
func narrows(root map[string]any, p string, frag map[string]any) error {
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
		if err := fitsParameter(root, p, raw); err != nil {
			return fmt.Errorf("%s is not a value the upstream accepts for it: %w", raw, err)
		}
	}
	return nil
}

// fitsParameter validates value against the upstream's schema for
// parameter p: the root schema reduced to its properties and the keywords
// references may point into, checked on {p: value}.
func fitsParameter(root map[string]any, p string, value json.RawMessage) error {
	doc := map[string]any{}
	for _, k := range []string{"$schema", "$id", "$anchor", "$dynamicAnchor", "$defs", "definitions", "properties"} {
		if v, ok := root[k]; ok {
			doc[k] = v
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	s, err := toolschema.Compile(raw, toolschema.Limits{})
	if err != nil {
		return fmt.Errorf("the parameter's schema cannot be checked on its own: %w", err)
	}
	k, _ := json.Marshal(p)
	return s.Validate(json.RawMessage(`{` + string(k) + `:` + string(value) + `}`))
}

// HiddenArgument is the error of a call that sets a hidden parameter: the
// operator fixes it, a client cannot.
type HiddenArgument struct{ Name string }

func (e *HiddenArgument) Error() string {
	return fmt.Sprintf("argument %q is not accepted: the gateway sets it", e.Name)
}

// Inject adds the hidden parameters' fixed values to arguments already
// validated against the client-facing schema, keeping the client's bytes
// as they were, and checks the result against the upstream's own schema. A
// call that sets a hidden parameter is refused with *HiddenArgument, keys
// compared after JSON unescaping ("\u0073hop" is "shop").
func (a *Applied) Inject(args json.RawMessage) (json.RawMessage, error) {
	if len(a.names) == 0 {
		return args, nil
	}
	obj := bytes.TrimSpace(args)
	if len(obj) == 0 || string(obj) == "null" {
		obj = []byte("{}")
	}
	empty, err := a.checkKeys(obj)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(a.fixed)+2)
	if empty {
		out = append(append(append(out, '{'), a.fixed...), '}')
	} else {
		out = append(append(append(append(out, obj[:len(obj)-1]...), ','), a.fixed...), '}')
	}
	if err := a.upstream.ValidateArguments(out); err != nil {
		return nil, fmt.Errorf("with the gateway's fixed values, the arguments do not fit the upstream's schema: %w", err)
	}
	return out, nil
}

// checkKeys refuses an object that names a hidden parameter, and reports
// whether it is empty.
func (a *Applied) checkKeys(obj []byte) (empty bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, errors.New("arguments must be a JSON object")
	}
	empty = true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		if k, _ := tok.(string); a.hidden[k] {
			return false, &HiddenArgument{Name: k}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false, err
		}
		empty = false
	}
	return empty, nil
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
