package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/canonjson"
)

// Kind says what a record is about. Readers must accept kinds they do not
// know: later releases add more.
type Kind string

// The kinds toolgate writes.
const (
	KindCall         Kind = "call"          // one tools/call, whatever its outcome
	KindApproval     Kind = "approval"      // an approver approved or denied a held call
	KindPolicyReload Kind = "policy_reload" // the Casbin model or policy was reloaded (or the reload failed)
	KindPinChange    Kind = "pin_change"    // a tool was pinned, blocked for a changed definition, or approved
	KindKeysReload   Kind = "keys_reload"   // auth.api_keys and admin.key_sha256 were reloaded (or the reload was refused); counts and principals only, never a key or its hash
	KindCredential   Kind = "credential"    // a per-user upstream credential was set or revoked through the admin API; never the secret
)

// Decision is what the gateway (or an approver) decided. Like Kind, the set
// is open.
type Decision string

// The decisions toolgate writes.
const (
	DecisionAllowed          Decision = "allowed"           // the call ran and succeeded
	DecisionDenied           Decision = "denied"            // refused before the upstream: policy, schema, pin, approval denied
	DecisionFailed           Decision = "failed"            // allowed, but the upstream or toolgate failed it
	DecisionApprovalRequired Decision = "approval_required" // held for a human approval
	DecisionApproved         Decision = "approved"          // an approver let a held call (or a changed tool) through
	DecisionApplied          Decision = "applied"           // a reload or pin change took effect
	DecisionRejected         Decision = "rejected"          // a reload was refused; the previous policy (or keys) stay
)

// ZeroHash is the prev of the record with seq 1: there is no line before it.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Redacted replaces the value of every redacted argument field.
const Redacted = "[redacted]"

// timeLayout is RFC 3339 with all nine fraction digits, so that times sort
// as text and every line has the same shape.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Record is one audit line. Append sets Seq and Prev; the rest is the
// caller's, and empty fields are left out of the line (attempts and
// duration_ms are always written for calls, where 0 means something).
type Record struct {
	Seq  uint64 `json:"seq"`  // position in the chain, from 1; set by Append
	Prev string `json:"prev"` // hex SHA-256 of the previous line; set by Append
	// Time is when the decision was made; the zero value means "now"
	// (Options.Now). Written in UTC with nanoseconds.
	Time      time.Time `json:"time"`
	Kind      Kind      `json:"kind"`
	Principal string    `json:"principal,omitempty"`
	Session   string    `json:"session,omitempty"` // MCP session id, or the client's id on stdio
	Tool      string    `json:"tool,omitempty"`    // canonical <server>/<tool>, never the client-facing name
	// ArgsDigest is "sha256:<hex>" of the canonical JSON of the arguments
	// (see Digest). Append computes it from Args when it is empty.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Args are the call's arguments as received. Append writes them only
	// when Options.IncludeArgs is set, with Options.Redact applied; otherwise
	// only their digest reaches the file.
	Args      json.RawMessage `json:"args,omitempty"`
	Decision  Decision        `json:"decision,omitempty"`
	ErrorCode string          `json:"error_code,omitempty"` // the envelope's error_code
	// Stage is the link of the call chain (gateway/chain.go) that stopped a call that did not
	// succeed: "authorize", "approve", "execute"; empty for one that did.
	Stage string `json:"stage,omitempty"`
	// Reason is the internal why: the policy line (file:line), the schema
	// path, the upstream's failure. Never shown to clients.
	Reason        string         `json:"reason,omitempty"`
	Attempts      int            `json:"attempts,omitempty"`    // upstream attempts, retries included
	DurationMS    int64          `json:"duration_ms,omitempty"` // whole call, in milliseconds
	PolicyVersion string         `json:"policy_version,omitempty"`
	Details       map[string]any `json:"details,omitempty"` // anything else, for kinds other than call
	// Shadow is set on a call record only when the shadow policy
	// (authz.shadow_policy) decided the call otherwise than the live one.
	Shadow *Shadow `json:"shadow,omitempty"`
}

// Shadow is a shadow policy's decision on a call where it disagrees with
// the live policy's, which decided the call (DecisionAllowed or
// DecisionDenied for both; the rules are "file:line", "" when no line
// allowed it).
type Shadow struct {
	Decision     Decision `json:"decision"`
	Rule         string   `json:"rule,omitempty"`
	Version      string   `json:"version,omitempty"` // the shadow policy's version
	LiveDecision Decision `json:"live_decision"`
	LiveRule     string   `json:"live_rule,omitempty"`
}

// wire is a Record as written, minus seq and prev, which Append puts in
// front under its lock: everything else is encoded before taking it.
type wire struct {
	Time          string          `json:"time"`
	Kind          Kind            `json:"kind"`
	Principal     string          `json:"principal,omitempty"`
	Session       string          `json:"session,omitempty"`
	Tool          string          `json:"tool,omitempty"`
	ArgsDigest    string          `json:"args_digest,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	Decision      Decision        `json:"decision,omitempty"`
	ErrorCode     string          `json:"error_code,omitempty"`
	Stage         string          `json:"stage,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	Attempts      *int            `json:"attempts,omitempty"`
	DurationMS    *int64          `json:"duration_ms,omitempty"`
	PolicyVersion string          `json:"policy_version,omitempty"`
	Details       map[string]any  `json:"details,omitempty"`
	Shadow        *Shadow         `json:"shadow,omitempty"`
}

// encoder turns Records into line bodies according to the Options.
type encoder struct {
	now         func() time.Time
	includeArgs bool
	redact      [][]string // each path split at dots
}

func newEncoder(o Options) encoder {
	e := encoder{now: o.Now, includeArgs: o.IncludeArgs}
	for _, p := range o.Redact {
		e.redact = append(e.redact, strings.Split(p, "."))
	}
	return e
}

// body encodes r without seq and prev: `{"time":…}`, no newline.
func (e encoder) body(r Record) ([]byte, error) {
	if r.Kind == "" {
		return nil, errors.New("audit: record without a kind")
	}
	if r.Time.IsZero() {
		r.Time = e.now()
	}
	w := wire{
		Time: r.Time.UTC().Format(timeLayout), Kind: r.Kind, Principal: r.Principal, Session: r.Session,
		Tool: r.Tool, ArgsDigest: r.ArgsDigest, Decision: r.Decision, ErrorCode: r.ErrorCode, Stage: r.Stage, Reason: r.Reason,
		PolicyVersion: r.PolicyVersion, Details: r.Details, Shadow: r.Shadow,
	}
	if len(r.Args) > 0 {
		if w.ArgsDigest == "" {
			w.ArgsDigest = Digest(r.Args)
		}
		if e.includeArgs {
			w.Args = redact(r.Args, e.redact)
		}
	}
	if r.Kind == KindCall || r.Attempts != 0 {
		w.Attempts = &r.Attempts
	}
	if r.Kind == KindCall || r.DurationMS != 0 {
		w.DurationMS = &r.DurationMS
	}
	if b, ok := appendWire(make([]byte, 0, 512), &w); ok {
		return b, nil
	}
	b, err := marshal(w)
	if err != nil && w.Details != nil {
		// A detail that JSON cannot hold (a NaN, a channel) must not cost the
		// record: keep everything else and say what happened.
		w.Details = map[string]any{"unencodable": err.Error()}
		b, err = marshal(w)
	}
	return b, err
}

// appendWire writes w as marshal would, for the records nearly every call
// writes: no details, no arguments, strings that need no escaping. Through
// encoding/json's reflection that was 2% of the gateway's CPU per call.
// Anything else reports false and goes through marshal; a test holds the
// two to the same bytes.
func appendWire(b []byte, w *wire) ([]byte, bool) {
	if w.Details != nil || w.Args != nil || w.Shadow != nil {
		return b, false
	}
	b = append(b, '{')
	fields := [...]struct {
		name, value string
		always      bool
	}{
		{"time", w.Time, true}, {"kind", string(w.Kind), true}, {"principal", w.Principal, false},
		{"session", w.Session, false}, {"tool", w.Tool, false}, {"args_digest", w.ArgsDigest, false},
		{"decision", string(w.Decision), false}, {"error_code", w.ErrorCode, false}, {"stage", w.Stage, false},
		{"reason", w.Reason, false},
	}
	for _, f := range fields {
		if f.value == "" && !f.always {
			continue
		}
		if !plainString(f.value) {
			return b, false
		}
		b = appendMember(b, f.name)
		b = append(append(append(b, '"'), f.value...), '"')
	}
	if w.Attempts != nil {
		b = strconv.AppendInt(appendMember(b, "attempts"), int64(*w.Attempts), 10)
	}
	if w.DurationMS != nil {
		b = strconv.AppendInt(appendMember(b, "duration_ms"), *w.DurationMS, 10)
	}
	if w.PolicyVersion != "" {
		if !plainString(w.PolicyVersion) {
			return b, false
		}
		b = append(append(append(appendMember(b, "policy_version"), '"'), w.PolicyVersion...), '"')
	}
	return append(b, '}'), true
}

// appendMember writes `"name":`, after a comma unless it is the first.
func appendMember(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(append(append(b, '"'), name...), `":`...)
}

// plainString reports whether encoding/json writes s as it is, in quotes:
// printable ASCII without a quote or backslash (HTML escaping is off).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// marshal is json.Marshal without HTML escaping (the file is read by
// people and tools, not browsers) and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// lineOverhead bounds what a line adds to its body: seq and prev, their
// keys and the newline (91 bytes with a 20-digit seq).
const lineOverhead = 100

// appendLine appends the line of body to b: `{"seq":N,"prev":"…",` + the
// body's members, and the newline.
func appendLine(b []byte, seq uint64, prev string, body []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...)
	b = append(b, `",`...)
	b = append(b, body[1:]...)
	return append(b, '\n')
}

// hashLine is the chain hash of a line given without its newline.
func hashLine(l []byte) string {
	sum := sha256.Sum256(l)
	return hex.EncodeToString(sum[:])
}

// Digest is "sha256:<hex>" of the canonical JSON of args (package
// canonjson), so that key order, whitespace and number spelling do not
// change it; its hex part equals the approvals store's args_hash. Arguments
// canonjson refuses (duplicate keys, invalid UTF-8) have no canonical form:
// they get "sha256-raw:<hex>" of their exact bytes instead.
func Digest(args json.RawMessage) string {
	if c, err := canonjson.Canonical(args); err == nil {
		sum := sha256.Sum256(c)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256(args)
	return "sha256-raw:" + hex.EncodeToString(sum[:])
}

// RedactArgs is args as the trail writes them when Options.IncludeArgs is set and Options.Redact is
// fields: what the gateway lets leave it of a call's arguments elsewhere too (an approval webhook).
func RedactArgs(args json.RawMessage, fields []string) json.RawMessage {
	paths := make([][]string, len(fields))
	for i, f := range fields {
		paths[i] = strings.Split(f, ".")
	}
	return redact(args, paths)
}

// redact returns args with the value at each path replaced by Redacted. A
// path is a top-level key ("password") or keys joined by dots
// ("card.number"); an array on the way applies the rest of the path to
// each of its elements ("items.card" reaches items[i].card). Paths that are
// not present change nothing. Arguments that are not JSON are replaced
// whole: writing them could break the line.
func redact(args json.RawMessage, paths [][]string) json.RawMessage {
	if len(paths) == 0 && json.Valid(args) {
		return args // json.Marshal compacts it onto one line
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // keep big integers and decimals exactly as sent
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return json.RawMessage(`"[not JSON]"`)
	}
	for _, p := range paths {
		v = redactPath(v, p)
	}
	out, err := marshal(v)
	if err != nil {
		return json.RawMessage(`"[not JSON]"`)
	}
	return out
}

func redactPath(v any, path []string) any {
	switch x := v.(type) {
	case map[string]any:
		child, ok := x[path[0]]
		switch {
		case !ok:
		case len(path) == 1:
			x[path[0]] = Redacted
		default:
			x[path[0]] = redactPath(child, path[1:])
		}
	case []any:
		for i := range x {
			x[i] = redactPath(x[i], path)
		}
	}
	return v
}

// head is what Verify and Open read of a line: the chain fields and enough
// to tell a record from other JSON.
type head struct {
	Seq  *uint64 `json:"seq"`
	Prev *string `json:"prev"`
	Time *string `json:"time"`
	Kind *string `json:"kind"`
}

// parseHead checks that l (without its newline) is an audit record and
// returns its seq and prev.
func parseHead(l []byte) (seq uint64, prev string, err error) {
	if len(l) == 0 {
		return 0, "", errors.New("empty line")
	}
	var h head
	if err := json.Unmarshal(l, &h); err != nil {
		return 0, "", fmt.Errorf("not a JSON object: %v", err)
	}
	switch {
	case h.Seq == nil || *h.Seq == 0:
		return 0, "", errors.New(`no "seq" of 1 or more`)
	case h.Prev == nil || !isHash(*h.Prev):
		return 0, "", errors.New(`no "prev" of 64 lowercase hex digits`)
	case h.Kind == nil || *h.Kind == "":
		return 0, "", errors.New(`no "kind"`)
	case h.Time == nil:
		return 0, "", errors.New(`no "time"`)
	}
	if _, err := time.Parse(time.RFC3339Nano, *h.Time); err != nil {
		return 0, "", fmt.Errorf(`"time" is not RFC 3339: %q`, *h.Time)
	}
	return *h.Seq, *h.Prev, nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
