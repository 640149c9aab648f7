package toolschema

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

const orderSchema = `{
	"type": "object",
	"properties": {
		"order_id": {"type": "integer", "minimum": 1},
		"status":   {"enum": ["pending", "shipped", "cancelled"]},
		"note":     {"type": "string", "maxLength": 5},
		"tags":     {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
		"address":  {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"]},
		"lines":    {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
		"coupon":   {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"kind":     {"const": "retail"}
	},
	"required": ["order_id", "status"],
	"additionalProperties": false
}`

func TestValidateArguments(t *testing.T) {
	s := mustCompile(t, orderSchema)
	tests := []struct {
		name     string
		args     string
		wantPath string
		wantMsg  string // exact message; "" means valid
	}{
		{"valid", `{"order_id": 7, "status": "pending"}`, "", ""},
		{"valid with optional fields", `{"order_id": 7, "status": "shipped", "tags": ["a"], "address": {"zip": "12345"}, "coupon": null}`, "", ""},
		{"type mismatch", `{"order_id": "7", "status": "pending"}`, "/order_id", `field "order_id": expected integer, got string`},
		{"fraction for integer", `{"order_id": 7.5, "status": "pending"}`, "/order_id", `field "order_id": expected integer, got number`},
		{"missing required", `{"order_id": 7}`, "/status", `missing required field "status"`},
		{"two missing required", `{}`, "/order_id", `missing required field "order_id"; missing required field "status"`},
		{"enum", `{"order_id": 7, "status": "lost"}`, "/status", `field "status": must be one of "pending", "shipped", "cancelled"`},
		{"additionalProperties false", `{"order_id": 7, "status": "pending", "discount": 99}`, "/discount", `unexpected field "discount" (not in the schema)`},
		{"nested field path", `{"order_id": 7, "status": "pending", "address": {"zip": "abc"}}`, "/address/zip", `field "address.zip": must match pattern "^[0-9]{5}$"`},
		{"nested missing required", `{"order_id": 7, "status": "pending", "address": {}}`, "/address/zip", `missing required field "address.zip"`},
		{"array item path", `{"order_id": 7, "status": "pending", "lines": [{"sku": "a"}, {"sku": 3}]}`, "/lines/1/sku", `field "lines[1].sku": expected string, got number`},
		{"minimum", `{"order_id": 0, "status": "pending"}`, "/order_id", `field "order_id": must be >= 1`},
		{"maxLength", `{"order_id": 1, "status": "pending", "note": "too long"}`, "/note", `field "note": must be at most 5 characters long`},
		{"uniqueItems", `{"order_id": 1, "status": "pending", "tags": ["a", "a"]}`, "/tags", `field "tags": items must be unique, but items 0 and 1 are equal`},
		{"nullable merges types", `{"order_id": 1, "status": "pending", "coupon": 5}`, "/coupon", `field "coupon": expected string or null, got number`},
		{"const", `{"order_id": 1, "status": "pending", "kind": "wholesale"}`, "/kind", `field "kind": must be "retail"`},
		{"several problems, sorted", `{"order_id": "x", "status": "lost", "zzz": 1, "note": "too long"}`, "/note",
			`field "note": must be at most 5 characters long; field "order_id": expected integer, got string; field "status": must be one of "pending", "shipped", "cancelled"; and 1 more`},
		{"null arguments are {}", `null`, "/order_id", `missing required field "order_id"; missing required field "status"`},
		{"absent arguments are {}", ``, "/order_id", `missing required field "order_id"; missing required field "status"`},
		{"array arguments", `[1, 2]`, "", `arguments must be a JSON object, got array`},
		{"string arguments", `"order 7"`, "", `arguments must be a JSON object, got string`},
		{"number arguments", `7`, "", `arguments must be a JSON object, got number`},
		{"not JSON", `{"order_id": 7,`, "", `arguments are not valid JSON: unexpected end of JSON input`},
		{"duplicate key", `{"order_id": 7, "status": "pending", "order_id": "7; DROP"}`, "/order_id", `field "order_id" appears more than once`},
		{"keys differing only in case", `{"order_id": 7, "status": "pending", "Order_ID": 8}`, "/Order_ID", `field "Order_ID" appears more than once (field names that differ only in letter case are the same field)`},
		{"kelvin sign folds to k", `{"order_id": 7, "status": "pending", "meta": {"k": 1, "\u212a": 2}}`, "/meta/\u212a", "field \"meta.\u212a\" appears more than once (field names that differ only in letter case are the same field)"},
		{"huge number", `{"order_id": 1e999999, "status": "pending"}`, "/order_id", `field "order_id": number 1e999999 is out of the supported range`},
		{"too deep", `{"order_id": 1, "status": "pending", "note": ` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "/note/0/0/0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.ValidateArguments(json.RawMessage(tt.args))
			if tt.wantMsg == "" && tt.wantPath == "" {
				if err != nil {
					t.Fatalf("ValidateArguments: %v", err)
				}
				return
			}
			v := asViolation(t, err)
			if !strings.HasPrefix(v.Path, tt.wantPath) {
				t.Errorf("Path = %q, want %q", v.Path, tt.wantPath)
			}
			if tt.wantMsg != "" && v.Message != tt.wantMsg {
				t.Errorf("Message = %q\nwant      %q", v.Message, tt.wantMsg)
			}
		})
	}
}

func TestValidateInstance(t *testing.T) {
	tests := []struct {
		name, schema, instance string
		wantMsg                string // "" means valid
	}{
		{"root type", `{"type":"object"}`, `[1]`, `expected object, got array`},
		{"root null is not {}", `{"type":"object"}`, `null`, `expected object, got null`},
		{"not JSON", `{"type":"object"}`, `{`, `value is not valid JSON: unexpected end of JSON input`},
		{"false subschema", `{"type":"object","properties":{"x":false}}`, `{"x":1}`, `field "x" is not allowed`},
		{"propertyNames", `{"type":"object","propertyNames":{"maxLength":2}}`, `{"abc":1}`, `field name "abc" is not allowed`},
		{"oneOf none matched", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string","minLength":5},{"type":"integer"}]}}}`, `{"a":"abc"}`,
			`field "a": does not match any of the allowed alternatives (first alternative: field "a": must be at least 5 characters long)`},
		{"fractional bound", `{"type":"number","minimum":0.5}`, `0.25`, `must be >= 0.5`},
		{"recursive schema, deep path", `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"name":{"type":"string"}}}},"$ref":"#/$defs/n"}`,
			`{"kids":[{"kids":[{"name":5}]}]}`, `field "kids[0].kids[0].name": expected string, got number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustCompile(t, tt.schema).Validate(json.RawMessage(tt.instance))
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if v := asViolation(t, err); v.Message != tt.wantMsg {
				t.Errorf("Message = %q\nwant      %q", v.Message, tt.wantMsg)
			}
		})
	}
}

// Integers above 2^53 must be compared exactly: as float64, both of these
// would round to 9007199254740992 and pass.
func TestDeepInstance(t *testing.T) {
	s := mustCompile(t, `{"type":"object"}`)
	deep := `{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	v := asViolation(t, s.Validate(json.RawMessage(deep)))
	if !strings.HasPrefix(v.Path, "/a/0/0/0") || !strings.HasSuffix(v.Message, "nested more than 256 levels deep") {
		t.Errorf("Path %q, Message %q", v.Path, v.Message)
	}
	if len(v.Message) > maxMessageLen {
		t.Errorf("message is %d bytes, over %d", len(v.Message), maxMessageLen)
	}
}

func TestLargeIntegers(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"order_id":{"type":"integer","maximum": 9007199254740993}}}`)
	if err := s.ValidateArguments(json.RawMessage(`{"order_id": 9007199254740993}`)); err != nil {
		t.Errorf("2^53+1 against maximum 2^53+1: %v", err)
	}
	err := s.ValidateArguments(json.RawMessage(`{"order_id": 9007199254740994}`))
	if v := asViolation(t, err); v.Message != `field "order_id": must be <= 9007199254740993` {
		t.Errorf("Message = %q", v.Message)
	}
}

func TestMessageIsCapped(t *testing.T) {
	long := strings.Repeat("x", 400) + "_id"
	s := mustCompile(t, `{"type":"object","properties":{"`+long+`":{"type":"string"}}}`)
	v := asViolation(t, s.ValidateArguments(json.RawMessage(`{"`+long+`": 1}`)))
	if want := `field "…` + strings.Repeat("x", maxNameLen-len("…_id")) + `_id": expected string, got number`; v.Message != want {
		t.Errorf("Message = %q\nwant      %q", v.Message, want)
	}
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf(`"%s%d": 1`, strings.Repeat("y", 70), i)
	}
	s = mustCompile(t, `{"type":"object","additionalProperties":{"type":"string"}}`)
	v = asViolation(t, s.ValidateArguments(json.RawMessage(`{`+strings.Join(many, ",")+`}`)))
	if len(v.Message) > maxMessageLen || !strings.HasSuffix(v.Message, "…") {
		t.Errorf("message not capped at %d bytes: %d bytes: %q", maxMessageLen, len(v.Message), v.Message)
	}
}

func TestValidateIsSafeForConcurrentUse(t *testing.T) {
	s := mustCompile(t, orderSchema)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				ok := s.ValidateArguments(json.RawMessage(`{"order_id": 7, "status": "pending"}`))
				bad := s.ValidateArguments(json.RawMessage(`{"order_id": "7", "status": "pending"}`))
				if ok != nil || bad == nil {
					t.Errorf("goroutine %d: ok=%v bad=%v", i, ok, bad)
					return
				}
			}
		}()
	}
	wg.Wait()
}
