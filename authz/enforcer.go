package authz

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// Enforcer answers policy decisions. It wraps a Casbin SyncedEnforcer (not the cached one: the
// cached enforcer kept revoked principals allowed after reload and its cache key can collide).
//
// An Enforcer is never modified after [Load]: a policy change means loading a new Enforcer and
// swapping it in, so the last good one stays in force when a new policy fails to load. It is safe
// for concurrent use; each decision takes only Casbin's read lock.
type Enforcer struct {
	se      *casbin.SyncedEnforcer
	version string
	rules   int
}

// Load builds an enforcer from a Casbin model file and a CSV policy file.
//
// Errors name the file (and line when the problem is a policy line, as *[LoadError]) and Load
// never panics. Besides everything Casbin itself refuses, a policy line is refused when Casbin
// would accept it but misread it: an effect other than exactly "allow"/"deny", a field with
// leading or trailing whitespace, an empty field, a "#" inside a field (inline comment), "$" in a
// field, an action other than "call", a line type the model does not define, or a field count
// that differs from the model's definition. The model's request must have exactly three fields
// (sub, obj, act), the shape [Enforcer.Decide] asks about.
func Load(modelPath, policyPath string) (e *Enforcer, err error) {
	defer func() {
		if r := recover(); r != nil {
			e = nil
			err = fmt.Errorf("authz: loading %s and %s panicked: %v\n%s", modelPath, policyPath, r, debug.Stack())
		}
	}()

	modelText, err := os.ReadFile(modelPath)
	if err != nil {
		return nil, &LoadError{File: modelPath, Reason: readReason(err)}
	}
	policyText, err := os.ReadFile(policyPath)
	if err != nil {
		return nil, &LoadError{File: policyPath, Reason: readReason(err)}
	}
	return build(modelPath, modelText, policyPath, policyText)
}

func readReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("cannot read: %v", pe.Err)
	}
	return fmt.Sprintf("cannot read: %v", err)
}

// build is Load after the files are read; panics are recovered by the caller.
func build(modelPath string, modelText []byte, policyPath string, policyText []byte) (*Enforcer, error) {
	m, err := model.NewModelFromString(string(modelText))
	if err != nil {
		return nil, &LoadError{File: modelPath, Reason: fmt.Sprintf("invalid model: %v", err)}
	}
	if reason := checkModel(m); reason != "" {
		return nil, &LoadError{File: modelPath, Reason: reason}
	}

	rules, err := parsePolicy(policyPath, policyText, m)
	if err != nil {
		return nil, err
	}

	se, err := casbin.NewSyncedEnforcer(m, &bytesAdapter{file: policyPath, lines: rules})
	if err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			return nil, err
		}
		return nil, &LoadError{File: policyPath, Reason: fmt.Sprintf("casbin refused the policy with this model (%s): %v", modelPath, err)}
	}

	return &Enforcer{
		se:      se,
		version: contentVersion(modelText, policyText),
		rules:   len(rules),
	}, nil
}

// checkModel returns why m cannot serve Decide, or "".
func checkModel(m model.Model) string {
	r, ok := m["r"]["r"]
	if !ok {
		return "no request definition r"
	}
	if len(r.Tokens) != 3 {
		return fmt.Sprintf("request definition r = %s must have exactly three fields (sub, obj, act)", r.Value)
	}
	if _, ok := m["p"]["p"]; !ok {
		return "no policy definition p"
	}
	return ""
}

// contentVersion is the first 12 hex digits of a SHA-256 over both files, each length-prefixed
// so that moving bytes from one file to the other changes the version.
func contentVersion(modelText, policyText []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, b := range [][]byte{modelText, policyText} {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Decide answers whether principal may perform act ("call") on obj (the canonical
// "<server>/<tool>" catalog ID, never a client-supplied string).
//
// Unknown principals are denied, as is every request with an empty field. When Casbin fails to
// evaluate (an invalid regex in the policy, a panic inside an evaluator), the answer is deny and
// the cause is returned as internal, for the LOG only: it can carry a goroutine stack, so callers
// must never show it to a client.
func (e *Enforcer) Decide(principal, obj, act string) (allowed bool, internal error) {
	if e == nil || e.se == nil {
		return false, errors.New("authz: no policy loaded")
	}
	if principal == "" || obj == "" || act == "" {
		return false, nil
	}
	defer func() {
		if r := recover(); r != nil {
			allowed = false
			internal = fmt.Errorf("authz: enforce panicked: %v\n%s", r, debug.Stack())
		}
	}()
	ok, err := e.se.Enforce(principal, obj, act)
	if err != nil {
		return false, fmt.Errorf("authz: enforce(%q, %q, %q): %w", principal, obj, act, err)
	}
	return ok, nil
}

// Visible filters canonical IDs to those principal may "call" (for tools/list filtering), in
// their original order. An ID whose decision fails is left out, as in Decide; use
// [Enforcer.VisibleErr] to log such failures.
func (e *Enforcer) Visible(principal string, objs []string) []string {
	out, _ := e.VisibleErr(principal, objs)
	return out
}

// VisibleErr is [Enforcer.Visible] that also returns the first internal error met (for the log
// only, never for a client), with a count of how many IDs failed.
func (e *Enforcer) VisibleErr(principal string, objs []string) ([]string, error) {
	out := make([]string, 0, len(objs))
	var first error
	failed := 0
	for _, obj := range objs {
		ok, err := e.Decide(principal, obj, ActCall)
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		if ok {
			out = append(out, obj)
		}
	}
	if first != nil {
		return out, fmt.Errorf("authz: %d of %d decisions failed; first: %w", failed, len(objs), first)
	}
	return out, nil
}

// Version is a short content hash of model+policy (SHA-256 hex, first 12 digits) for logs: two
// enforcers with the same version were loaded from byte-identical files.
func (e *Enforcer) Version() string {
	if e == nil {
		return ""
	}
	return e.version
}

// Rules is the number of policy rules (p and g lines) loaded, for logs.
func (e *Enforcer) Rules() int {
	if e == nil {
		return 0
	}
	return e.rules
}
