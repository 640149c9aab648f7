package envelope

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRetryableComesFromTheTable(t *testing.T) {
	cases := []struct {
		code          Code
		safe, notSafe bool
	}{
		{ToolNotFound, false, false},
		{ToolNotAllowed, false, false},
		{InvalidArguments, false, false},
		{ApprovalRequired, true, true},
		{ApprovalDenied, false, false},
		{RateLimited, true, true},
		{UpstreamUnavailable, true, true},
		{ToolTimeout, true, false},
		{UpstreamError, true, false},
		{ToolFailed, false, false},
		{ResultTooLarge, false, false},
		{InvalidResult, false, false},
		{ToolChanged, false, false},
		{DuplicateCall, false, false},
		{AuthorizationRequired, true, true},
		{InsufficientScope, false, false},
		{InternalError, false, false},
	}
	if len(cases) != len(table) {
		t.Fatalf("table has %d codes, test covers %d", len(table), len(cases))
	}
	for _, c := range cases {
		if got := c.code.Retryable(true); got != c.safe {
			t.Errorf("%s retry-safe: got %v want %v", c.code, got, c.safe)
		}
		if got := c.code.Retryable(false); got != c.notSafe {
			t.Errorf("%s not retry-safe: got %v want %v", c.code, got, c.notSafe)
		}
	}
	if Code("bogus").Known() || !ToolFailed.Known() {
		t.Error("Known disagrees with the table")
	}
}

func TestEnvelopeJSONShape(t *testing.T) {
	cases := []struct {
		name string
		env  Envelope
		want string
	}{
		{"success", Success(json.RawMessage(`{"updated":true}`)),
			`{"ok":true,"data":{"updated":true},"error_code":null,"message":null,"retryable":false}`},
		{"success without data", Success(nil),
			`{"ok":true,"data":null,"error_code":null,"message":null,"retryable":false}`},
		{"failure", Failure(Errorf(ToolTimeout, "no answer within %s", "8s"), true),
			`{"ok":false,"data":null,"error_code":"tool_timeout","message":"no answer within 8s","retryable":true}`},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.env)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestDetailNeverInMessage(t *testing.T) {
	e := Errorf(ToolNotAllowed, "not allowed").WithDetail("casbin: goroutine 1 [running] /etc/policy.csv")
	env, _ := json.Marshal(Failure(e, false))
	if strings.Contains(string(env), "casbin") || strings.Contains(e.Error(), "goroutine") {
		t.Fatalf("detail leaked: %s / %s", env, e.Error())
	}
}

func TestOutputSchema(t *testing.T) {
	cases := []struct {
		name     string
		upstream string
		wantData string // substring expected in properties.data
		wantRoot string // key expected at the root
	}{
		{"none", ``, `{}`, ""},
		{"plain", `{"type":"object","properties":{"v":{"type":"integer"}}}`, `"anyOf"`, ""},
		{"defs hoisted", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"n":{"type":"integer"}},"type":"object","properties":{"v":{"$ref":"#/$defs/n"}}}`, `#/$defs/n`, "$defs"},
		{"root ref falls back", `{"type":"object","properties":{"self":{"$ref":"#"}}}`, `{}`, ""},
		{"garbage falls back", `[1,2]`, `{}`, ""},
	}
	for _, c := range cases {
		var root map[string]any
		if err := json.Unmarshal(OutputSchema(json.RawMessage(c.upstream)), &root); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		data, _ := json.Marshal(root["properties"].(map[string]any)["data"])
		if !strings.Contains(string(data), c.wantData) {
			t.Errorf("%s: data schema %s lacks %s", c.name, data, c.wantData)
		}
		if strings.Contains(string(data), "$schema") {
			t.Errorf("%s: nested $schema kept: %s", c.name, data)
		}
		if c.wantRoot != "" && root[c.wantRoot] == nil {
			t.Errorf("%s: %s not hoisted to root", c.name, c.wantRoot)
		}
	}
}

// SuccessJSON writes what json.Marshal writes for Success(data), and fails
// where it fails.
func FuzzSuccessJSON(f *testing.F) {
	for _, s := range []string{``, `null`, `"text"`, ` { "a" : [1, 2] } `, `"<b>&` + "\u2028" + `"`, `{"a":`, `1 2`, `[[[]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := json.Marshal(Success(data))
		got, err := SuccessJSON(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("SuccessJSON(%q): error %v, json.Marshal's %v", data, err, wantErr)
		}
		if err == nil && string(got.Bytes()) != string(want) {
			t.Fatalf("SuccessJSON(%q) = %s, want %s", data, got, want)
		}
	})
}

// SuccessText is the success envelope of a string, byte for byte as
// json.Marshal writes it, in a buffer of exactly its size.
func FuzzSuccessText(f *testing.F) {
	for _, s := range []string{"", "plain", "line\nbreak <b>&</b> \u2028 \xff \x00", `{"looks":"like json"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		data, err := json.Marshal(text)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(Success(data))
		if err != nil {
			t.Fatal(err)
		}
		if got := SuccessText(text).Bytes(); string(got) != string(want) || cap(got) != len(got) {
			t.Fatalf("SuccessText(%q) = %s (cap %d), want %s", text, got, cap(got), want)
		}
	})
}
