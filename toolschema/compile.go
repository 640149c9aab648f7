package toolschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// resourceURL is the name the document is compiled under. It is internal:
// it must never appear in a Rejected reason or a Violation message. It is
// hierarchical on purpose: against an opaque base such as "urn:x:y" the
// compiler resolves a relative ref like "other.json" to the base itself,
// silently aliasing the root; here it becomes "toolgate:///other.json",
// which goes to refuseLoader and fails.
const resourceURL = "toolgate:///upstream-schema.json"

// annotationFormats are the formats the compiler would assert by default
// for drafts before 2019-09. Registering them as no-ops keeps "format" an
// annotation in every dialect. ("regex" cannot be overridden and stays
// asserted in draft-04/06/07.)
var annotationFormats = []string{
	"date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6",
	"iri", "iri-reference", "json-pointer", "period", "relative-json-pointer",
	"semver", "time", "uri", "uri-reference", "uri-template", "uuid",
}

// Schema is a compiled upstream schema. It is immutable and safe for
// concurrent use; compile once per catalog refresh, not per call.
type Schema struct {
	js *jsonschema.Schema
}

// Compile pre-checks raw under lim (zero fields take the defaults documented
// on [Limits]) before any compiler sees it, then compiles it as JSON Schema
// (2020-12 unless $schema names another supported draft) with a loader that
// refuses every URL. Rules, each with its own reason:
//
//   - raw must be one valid JSON value without duplicate keys or absurd
//     numbers, within MaxBytes, MaxDepth and MaxNodes;
//   - the top level must be an object (MCP requires an object schema;
//     a bare true/false is refused);
//   - at most MaxRefs $ref/$dynamicRef/$recursiveRef, each a local fragment
//     ("#", "#/pointer", "#anchor") whose target exists in the document;
//   - $id (and draft-04 id) only as a fragment ("#name"), never a base URI;
//   - $schema only one of the dialects the compiler ships;
//   - no reference cycle that returns to a schema without descending into
//     the instance (see findRefCycle); recursion through properties/items is fine;
//   - no value may cost more than maxEvaluations subschema evaluations in
//     the worst case (see checkFanOut), so Validate stays cheap too.
//
// Any error is a *Rejected whose Reason is fit for `toolgate check`.
func Compile(raw json.RawMessage, lim Limits) (*Schema, error) {
	lim = lim.withDefaults()
	s, err := precheck(raw, lim)
	if err != nil {
		return nil, err
	}
	js, err := compileDoc(s.root)
	if err != nil {
		return nil, compileRejection(err, s.root)
	}
	return &Schema{js: js}, nil
}

func compileDoc(doc map[string]any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	for _, name := range annotationFormats {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
	}
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(resourceURL)
}

// refuseLoader is the second line of defence behind the pre-check: if the
// compiler ever wants a document other than the one we added, it gets none.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %q refused: only local fragment refs are allowed", url)
}

// compileRejection words compiler errors for an operator. The schema passed
// the pre-check, so these are mostly "not a valid schema" (wrong keyword
// types, bad regex) as judged by the dialect's metaschema.
func compileRejection(err error, doc any) *Rejected {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		v := describer{doc: doc, pointers: true}.describe(ve)
		return rejectf("not a valid JSON Schema: %s", v.Message)
	}
	var re *jsonschema.InvalidRegexError
	if errors.As(err, &re) {
		return rejectf("invalid regular expression %q: %s", truncate(re.Regex, 100), scrub(re.Err.Error()))
	}
	return &Rejected{Reason: truncate(scrub(err.Error()), maxMessageLen)}
}

// scrub removes the internal resource URL and folds the compiler's
// multi-line output onto one line.
func scrub(s string) string {
	s = strings.ReplaceAll(s, resourceURL+"#", "#")
	s = strings.ReplaceAll(s, resourceURL, "schema")
	return strings.Join(strings.Fields(s), " ")
}
