package toolschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

const (
	maxMessageLen = 300 // bytes; a model needs the gist, not an essay
	maxProblems   = 3   // leaf problems named before "and N more"
	maxEnumShown  = 10  // enum values listed before "…"
	maxNameLen    = 80  // bytes of a field name kept in a message
)

var printer = message.NewPrinter(language.English)

// problem is one leaf failure, already worded.
type problem struct {
	path fieldPath
	text string
}

// describer words validation errors about one document: an instance (for a
// model, fields named like "items[0].sku") or, when the compiler checks a
// schema against its metaschema, the schema (for an operator, locations
// named by JSON pointer).
type describer struct {
	doc      any
	pointers bool
}

// describe turns the validator's error tree into one short Violation. The
// tree nests keyword failures (allOf, $ref, properties) around the real
// ones; only the leaves say what is wrong, so those are what we report,
// sorted so the message does not depend on map iteration order.
func describe(ve *jsonschema.ValidationError, instance any) *Violation {
	return describer{doc: instance}.describe(ve)
}

func (d describer) describe(ve *jsonschema.ValidationError) *Violation {
	probs := dedupe(d.collect(ve, nil))
	if len(probs) == 0 {
		return &Violation{Message: "does not match the schema"}
	}
	texts := make([]string, 0, maxProblems)
	for _, p := range probs[:min(len(probs), maxProblems)] {
		texts = append(texts, p.text)
	}
	msg := strings.Join(texts, "; ")
	if extra := len(probs) - maxProblems; extra > 0 {
		msg += fmt.Sprintf("; and %d more", extra)
	}
	return &Violation{Path: probs[0].path.pointer(), Message: truncate(msg, maxMessageLen)}
}

func (d describer) collect(e *jsonschema.ValidationError, out []problem) []problem {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		return append(out, d.alternatives(e))
	case *kind.OneOf:
		if k.Subschemas == nil {
			return append(out, d.alternatives(e))
		}
	}
	if len(e.Causes) == 0 || isPropertyNames(e) {
		return append(out, d.leafProblems(e)...)
	}
	for _, c := range e.Causes {
		out = d.collect(c, out)
	}
	return out
}

func isPropertyNames(e *jsonschema.ValidationError) bool {
	_, ok := e.ErrorKind.(*kind.PropertyNames)
	return ok
}

func dedupe(probs []problem) []problem {
	slices.SortStableFunc(probs, func(a, b problem) int {
		return strings.Compare(a.path.pointer()+"\x00"+a.text, b.path.pointer()+"\x00"+b.text)
	})
	return slices.CompactFunc(probs, func(a, b problem) bool { return a.text == b.text })
}

// alternatives words an anyOf/oneOf where nothing matched. The common case,
// a nullable field (anyOf string|null), reads best as one merged type
// error; otherwise we name the first alternative's problem as an example.
func (d describer) alternatives(e *jsonschema.ValidationError) problem {
	path := pathIn(d.doc, e.InstanceLocation)
	if want, got, ok := mergedTypes(e); ok {
		return problem{path, d.subject(path) + "expected " + strings.Join(want, " or ") + ", got " + got}
	}
	text := d.subject(path) + "does not match any of the allowed alternatives"
	if len(e.Causes) == 0 {
		return problem{path, text}
	}
	if first := d.collect(e.Causes[0], nil); len(first) > 0 {
		text += " (first alternative: " + first[0].text + ")"
	}
	return problem{path, text}
}

// mergedTypes succeeds when every branch failed only on "type" at the same
// location as the anyOf/oneOf itself.
func mergedTypes(e *jsonschema.ValidationError) (want []string, got string, ok bool) {
	for _, l := range leaves(e, nil) {
		t, isType := l.ErrorKind.(*kind.Type)
		if !isType || !slices.Equal(l.InstanceLocation, e.InstanceLocation) {
			return nil, "", false
		}
		got = t.Got
		for _, w := range t.Want {
			if !slices.Contains(want, w) {
				want = append(want, w)
			}
		}
	}
	return want, got, len(want) > 0
}

func leaves(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

// leafProblems words one failed keyword. Required and additionalProperties
// can name several fields; each becomes its own problem at its own path.
func (d describer) leafProblems(e *jsonschema.ValidationError) []problem {
	path := pathIn(d.doc, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		return d.fieldProblems(path, k.Missing, "missing required field ", "")
	case *kind.AdditionalProperties:
		return d.fieldProblems(path, k.Properties, "unexpected field ", " (not in the schema)")
	case *kind.FalseSchema:
		if len(path) == 0 {
			return []problem{{path, "no value is allowed here"}}
		}
		return []problem{{path, "field " + d.name(path) + " is not allowed"}}
	case *kind.PropertyNames:
		return []problem{{path.child(k.Property, false), "field name " + quoted(k.Property) + " is not allowed"}}
	}
	return []problem{{path, d.subject(path) + expectation(e.ErrorKind)}}
}

func (d describer) fieldProblems(parent fieldPath, names []string, prefix, suffix string) []problem {
	out := make([]problem, 0, len(names))
	for _, name := range names {
		p := parent.child(name, false)
		out = append(out, problem{p, prefix + d.name(p) + suffix})
	}
	return out
}

// expectation says what a single-value keyword wanted.
func expectation(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "expected " + strings.Join(k.Want, " or ") + ", got " + k.Got
	case *kind.Enum:
		return "must be one of " + enumList(k.Want)
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Minimum:
		return "must be >= " + ratText(k.Want)
	case *kind.Maximum:
		return "must be <= " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want)
	}
	return sizeExpectation(k)
}

func sizeExpectation(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d fields", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d fields", k.Want)
	case *kind.MinContains:
		return fmt.Sprintf("must contain at least %d matching items", k.Want)
	case *kind.MaxContains:
		return fmt.Sprintf("must contain at most %d matching items", k.Want)
	}
	return otherExpectation(k)
}

func otherExpectation(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return "must match pattern " + quoted(truncate(k.Want, 80))
	case *kind.Format:
		return "must be a valid " + k.Want
	case *kind.UniqueItems:
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return "must contain at least one matching item"
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %d more items than allowed", k.Count)
	case *kind.Not:
		return "must not match the excluded schema"
	case *kind.OneOf:
		return fmt.Sprintf("matches alternatives %d and %d; must match exactly one", k.Subschemas[0], k.Subschemas[1])
	case *kind.DependentRequired:
		return "field " + quoted(k.Prop) + " requires " + quotedList(k.Missing)
	case *kind.Dependency:
		return "field " + quoted(k.Prop) + " requires " + quotedList(k.Missing)
	}
	return scrub(k.LocalizedString(printer))
}

// subject prefixes a message with the field it is about; the document
// itself needs no name.
func (d describer) subject(path fieldPath) string {
	if len(path) == 0 {
		return ""
	}
	if d.pointers {
		return d.name(path) + ": "
	}
	return "field " + d.name(path) + ": "
}

// name quotes a field's name. Long names keep their end, which is the
// part that says which field it is.
func (d describer) name(path fieldPath) string {
	if d.pointers {
		return quoted(truncateStart(path.pointer(), maxNameLen))
	}
	return quoted(truncateStart(path.display(), maxNameLen))
}

func quoted(s string) string { return strconv.Quote(s) }

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoted(n)
	}
	return strings.Join(q, ", ")
}

func enumList(values []any) string {
	shown := make([]string, 0, min(len(values), maxEnumShown)+1)
	for _, v := range values[:min(len(values), maxEnumShown)] {
		shown = append(shown, jsonText(v))
	}
	if len(values) > maxEnumShown {
		shown = append(shown, "…")
	}
	return strings.Join(shown, ", ")
}

// jsonText renders a schema value as JSON, short enough for a message.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(string(b), 60)
}

// ratText prints a bound readably: integers exactly (beyond 2^53 too),
// fractions as decimals rather than big.Rat's "1/2".
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
