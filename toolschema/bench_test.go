package toolschema

import (
	"encoding/json"
	"testing"
)

const typicalSchema = `{
	"type": "object",
	"properties": {
		"order_id": {"type": "integer", "minimum": 1},
		"status":   {"enum": ["pending", "shipped", "cancelled"]},
		"note":     {"type": "string", "maxLength": 200},
		"tags":     {"type": "array", "items": {"type": "string"}},
		"express":  {"type": "boolean"}
	},
	"required": ["order_id", "status"],
	"additionalProperties": false
}`

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, typicalSchema)
	args := json.RawMessage(`{"order_id": 9007199254740993, "status": "shipped", "note": "leave at door", "tags": ["a", "b"], "express": true}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateArguments(args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateSmall is the load harness's call: one short string.
func BenchmarkValidateSmall(b *testing.B) {
	s := mustCompile(b, `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)
	args := json.RawMessage(`{"message":"ping 1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateArguments(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateViolation(b *testing.B) {
	s := mustCompile(b, typicalSchema)
	args := json.RawMessage(`{"order_id": "x", "status": "lost", "extra": 1}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateArguments(args); err == nil {
			b.Fatal("want a violation")
		}
	}
}

func BenchmarkCompileTypical(b *testing.B) {
	raw := json.RawMessage(typicalSchema)
	for b.Loop() {
		if _, err := Compile(raw, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The pre-check refuses a 1000-deep allOf in microseconds; the compiler
// alone spends seconds on it (docs/design.md, Security defaults).
func BenchmarkCompileDeepAllOf(b *testing.B) {
	raw := json.RawMessage(nested(1000, `{"type":"object"}`))
	for b.Loop() {
		if _, err := Compile(raw, Limits{}); err == nil {
			b.Fatal("want a rejection")
		}
	}
}

// A large recursive schema near the default limits: the fan-out analysis
// visits every node on every level until the levels repeat.
func BenchmarkCompileLargeRecursive(b *testing.B) {
	raw := json.RawMessage(`{"type":"object","properties":{"root":{"$ref":"#/$defs/n"},"flat":` + manyProps(6000) + `},"$defs":{"n":` + manyPropsRef(250) + `}}`)
	for b.Loop() {
		if _, err := Compile(raw, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
