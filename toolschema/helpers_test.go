package toolschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nested wraps inner in n levels of {"allOf":[ ... ]}.
func nested(n int, inner string) string {
	return strings.Repeat(`{"allOf":[`, n) + inner + strings.Repeat(`]}`, n)
}

// dagBomb is acyclic and tiny but doubles at every $def: 2^n evaluations.
func dagBomb(n int) string {
	defs := make([]string, 0, n+1)
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"a%d":{"type":"string"}`, n))
	return `{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// manyProps is an object schema with n string properties (2n+3 JSON values).
func manyProps(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"type":"string"}`, i)
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// manyRefs is an object schema with n properties that each $ref one $def.
func manyRefs(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"$ref":"#/$defs/s"}`, i)
	}
	return `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{` + strings.Join(props, ",") + `}}`
}

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(schema), Limits{})
	if err != nil {
		t.Fatalf("Compile(%.80s): %v", schema, err)
	}
	return s
}

func asRejected(t *testing.T, err error) *Rejected {
	t.Helper()
	var r *Rejected
	if !errors.As(err, &r) {
		t.Fatalf("error %v (%T) is not *Rejected", err, err)
	}
	return r
}

func asViolation(t *testing.T, err error) *Violation {
	t.Helper()
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("error %v (%T) is not *Violation", err, err)
	}
	return v
}

// manyPropsRef is an object schema with n properties that each recurse to
// #/$defs/n through an array.
func manyPropsRef(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"type":"array","items":{"$ref":"#/$defs/n"}}`, i)
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// costlyToAnalyse has 300 schemas that each add a property to a shared,
// recursive 2000-property $def: every level of checkFanOut merges 300
// copies of 2000 names. Only reachable with MaxRefs raised.
func costlyToAnalyse() string {
	holders := make([]string, 300)
	for i := range holders {
		holders[i] = fmt.Sprintf(`"h%d":{"$ref":"#/$defs/n","properties":{"z":{"$ref":"#/$defs/n"}}}`, i)
	}
	return `{"type":"object","properties":{` + strings.Join(holders, ",") + `},"$defs":{"n":` + manyPropsRef(2000) + `}}`
}
