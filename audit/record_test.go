package audit

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 9, 15, 0, 120000000, time.FixedZone("CET", 3600))

func fixedClock() time.Time { return t0 }

func TestBody(t *testing.T) {
	call := Record{Kind: KindCall, Principal: "alice", Session: "s1", Tool: "orders/refund_order",
		Args:     json.RawMessage(`{"order_id": 4821, "card": {"number": "4111", "exp": "12/29"}, "note": "<b>"}`),
		Decision: DecisionDenied, ErrorCode: "tool_not_allowed", Reason: "policy.csv:12", PolicyVersion: "abc123"}
	const digest = `"args_digest":"sha256:`
	tests := []struct {
		name string
		opts Options
		rec  Record
		want []string // substrings, in order
		not  []string
	}{
		{"call without args", Options{}, call,
			[]string{`{"time":"2026-11-30T08:15:00.120000000Z","kind":"call","principal":"alice","session":"s1","tool":"orders/refund_order",` + digest,
				`"decision":"denied","error_code":"tool_not_allowed","reason":"policy.csv:12","attempts":0,"duration_ms":0,"policy_version":"abc123"}`},
			[]string{`"args":`, "4111"}},
		{"call with redacted args", Options{IncludeArgs: true, Redact: []string{"card.number", "note", "absent.path"}}, call,
			[]string{digest, `"args":{"card":{"exp":"12/29","number":"[redacted]"},"note":"[redacted]","order_id":4821}`},
			[]string{"4111", "<b>"}},
		{"args without redaction stay on one line", Options{IncludeArgs: true},
			Record{Kind: KindCall, Args: json.RawMessage("{\n  \"a\": \"<x>\"\n}")},
			[]string{`"args":{"a":"<x>"}`}, []string{"\n"}},
		{"args that are not JSON", Options{IncludeArgs: true}, Record{Kind: KindCall, Args: json.RawMessage(`{"a":`)},
			[]string{`"args_digest":"sha256-raw:`, `"args":"[not JSON]"`}, nil},
		{"explicit time and digest kept", Options{},
			Record{Kind: KindApproval, Time: time.Unix(0, 5).UTC(), ArgsDigest: "sha256:ab", Args: json.RawMessage(`{}`),
				Decision: DecisionApproved, Details: map[string]any{"id": "apr_1", "by": "carol"}},
			[]string{`"time":"1970-01-01T00:00:00.000000005Z","kind":"approval","args_digest":"sha256:ab","decision":"approved","details":{"by":"carol","id":"apr_1"}}`},
			[]string{"attempts", "duration_ms"}},
		{"unencodable details do not cost the record", Options{},
			Record{Kind: KindPinChange, Details: map[string]any{"bad": func() {}}},
			[]string{`"kind":"pin_change","details":{"unencodable":"json: unsupported type: func()"}}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Now = fixedClock
			b, err := newEncoder(tt.opts).body(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("body %s\nlacks (in order) %s", got, w)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("body %s contains %q", got, n)
				}
			}
		})
	}
	if _, err := newEncoder(Options{Now: fixedClock}).body(Record{}); err == nil {
		t.Error("a record without a kind was encoded")
	}
}

// The digest is of the canonical form: spelling does not change it, the
// value does; it matches the approvals store's args_hash.
func TestDigest(t *testing.T) {
	a := Digest(json.RawMessage(`{"b":[1,2],"a":1.0}`))
	tests := []struct {
		args string
		same bool
	}{
		{`{"a":1,"b":[1,2]}`, true},
		{"{ \"a\" : 1e0 ,\n \"b\" : [ 1 , 2 ] }", true},
		{`{"a":1,"b":[2,1]}`, false},
		{`{"a":"1","b":[1,2]}`, false},
	}
	for _, tt := range tests {
		if got := Digest(json.RawMessage(tt.args)) == a; got != tt.same {
			t.Errorf("Digest(%s) equal: %v, want %v", tt.args, got, tt.same)
		}
	}
	const want = "sha256:ac8d8342bbb2362d13f0a559a3621bb407011368895164b628a54f7fc33fc43c" // sha256sum of the 3 bytes "a" with quotes
	if got := Digest(json.RawMessage(`"a"`)); got != want {
		t.Errorf("Digest(\"a\") = %s, want %s", got, want)
	}
	if got := Digest(json.RawMessage(`{"a":1,"a":2}`)); !strings.HasPrefix(got, "sha256-raw:") {
		t.Errorf("duplicate keys: %s, want sha256-raw:", got)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name  string
		args  string
		paths []string
		want  string
	}{
		{"top-level", `{"password":"x","user":"u"}`, []string{"password"}, `{"password":"[redacted]","user":"u"}`},
		{"nested", `{"card":{"number":"4111","cvv":"1"}}`, []string{"card.number", "card.cvv"},
			`{"card":{"cvv":"[redacted]","number":"[redacted]"}}`},
		{"whole object", `{"card":{"number":"4111"}}`, []string{"card"}, `{"card":"[redacted]"}`},
		{"through arrays", `{"items":[{"card":"1"},{"card":"2"},3]}`, []string{"items.card"},
			`{"items":[{"card":"[redacted]"},{"card":"[redacted]"},3]}`},
		{"absent path", `{"a":{"b":1}}`, []string{"a.c", "x.y", "a.b.c"}, `{"a":{"b":1}}`},
		{"top-level key only, not deeper", `{"a":{"password":"x"}}`, []string{"password"}, `{"a":{"password":"x"}}`},
		{"numbers kept exactly", `{"n":12345678901234567890.5,"s":"x"}`, []string{"s"}, `{"n":12345678901234567890.5,"s":"[redacted]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths [][]string
			for _, p := range tt.paths {
				paths = append(paths, strings.Split(p, "."))
			}
			if got := string(redact(json.RawMessage(tt.args), paths)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// appendWire, the hand-written encoder for everyday records, writes the
// bytes marshal writes, and leaves everything it does not handle to it.
func TestAppendWireMatchesMarshal(t *testing.T) {
	one, zero, dur := 1, 0, int64(12)
	tests := []struct {
		name string
		w    wire
		ok   bool
	}{
		{"call", wire{Time: "2026-11-30T08:15:00.120000000Z", Kind: KindCall, Principal: "alice", Session: "s1",
			Tool: "orders/refund_order", ArgsDigest: "sha256:ab", Decision: DecisionAllowed, Attempts: &one, DurationMS: &dur,
			PolicyVersion: "v1"}, true},
		{"empty fields left out, zero counts kept", wire{Time: "t", Kind: KindCall, Attempts: &zero, DurationMS: new(int64)}, true},
		{"a refused call, with its stage", wire{Time: "t", Kind: KindCall, Decision: DecisionDenied, ErrorCode: "tool_not_allowed",
			Stage: "authorize", Reason: "policy.csv:4", Attempts: &zero, DurationMS: &dur}, true},
		{"no counts", wire{Time: "t", Kind: KindPolicyReload, Decision: DecisionApplied, Reason: "model.conf:3 <ok> & more"}, true},
		{"a quote", wire{Time: "t", Kind: KindCall, Reason: `say "hi"`}, false},
		{"a control character", wire{Time: "t", Kind: KindCall, Principal: "a\nb"}, false},
		{"non-ASCII", wire{Time: "t", Kind: KindCall, Tool: "café"}, false},
		{"a backslash in the policy version", wire{Time: "t", Kind: KindCall, PolicyVersion: `a\b`}, false},
		{"details", wire{Time: "t", Kind: KindApproval, Details: map[string]any{"id": "x"}}, false},
		{"args", wire{Time: "t", Kind: KindCall, Args: json.RawMessage(`{}`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := appendWire(nil, &tt.w)
			if ok != tt.ok {
				t.Fatalf("handled %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			want, err := marshal(tt.w)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("appendWire:\n%s\nmarshal:\n%s", got, want)
			}
		})
	}
}

// Every kind toolgate writes, keys_reload included, and a kind this release does not know verify
// alike: Verify checks the chain and that kind is present, never which kind it is.
func TestVerifyAcceptsEveryKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{KindCall, KindApproval, KindPolicyReload, KindPinChange, KindKeysReload, "from_a_later_release"} {
		if err := l.Append(Record{Kind: k, Decision: DecisionApplied}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(path)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != 6 {
		t.Errorf("verified %d records, want 6", rep.Records)
	}
}
