package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// Number literals beyond these bounds are refused: the validator converts
// every number to a big.Rat, and parsing 1e999999 takes ~25 ms, so an array
// of them is a cheap denial of service. Inside the bounds parsing is a few µs.
const (
	maxNumberLen      = 100
	maxNumberExponent = 400
)

// decodeLimits bounds decode. Zero means unlimited (only used for maxNodes).
type decodeLimits struct {
	maxDepth int
	maxNodes int
	// foldKeys also refuses keys of one object that differ only in letter
	// case. For arguments: upstreams that decode into structs (Go's
	// encoding/json among them) match field names case-insensitively, so
	// {"amount":50,"Amount":5000} would be checked as one value and acted
	// on as another.
	foldKeys bool
}

// decodeErrKind says which rule a document broke, so callers can word it for
// their audience (an operator for schemas, a model for arguments).
type decodeErrKind int

const (
	errSyntax decodeErrKind = iota
	errDepth
	errNodes
	errDuplicateKey
	errCaseDuplicateKey
	errNumber
)

type decodeError struct {
	kind   decodeErrKind
	path   fieldPath // the value at fault
	detail string    // syntax error text, duplicate key, or number literal
}

func (e *decodeError) Error() string { return e.detail }

// frame is one open object or array while decoding.
type frame struct {
	obj     map[string]any
	arr     []any
	isObj   bool
	key     string // pending key in an object
	haveKey bool
	folded  map[string]bool // case-folded keys seen, when foldKeys is on
	name    string          // this container's token in its parent's pointer
}

// decoder builds a tree of map[string]any / []any / json.Number / string /
// bool / nil from JSON tokens. It is iterative, so hostile nesting cannot
// exhaust the stack, and it enforces limits while reading, so it stops at
// the first offending token instead of materialising the whole document.
type decoder struct {
	lim   decodeLimits
	stack []*frame
	nodes int
	root  any
	done  bool
}

// decode parses raw as exactly one JSON value under lim.
func decode(raw []byte, lim decodeLimits) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	d := &decoder{lim: lim}
	for !d.done {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		if err := d.token(tok); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &decodeError{kind: errSyntax, detail: "unexpected data after the top-level value"}
	}
	return d.root, nil
}

func syntaxError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &decodeError{kind: errSyntax, detail: "unexpected end of JSON input"}
	}
	return &decodeError{kind: errSyntax, detail: err.Error()}
}

func (d *decoder) token(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' || t == '[' {
			return d.open(t == '{')
		}
		return d.close()
	case string:
		if top := d.top(); top != nil && top.isObj && !top.haveKey {
			return d.key(top, t)
		}
		return d.value(t)
	case json.Number:
		if !numberInRange(string(t)) {
			return d.fail(errNumber, truncate(string(t), 40))
		}
		return d.value(t)
	default: // bool, nil
		return d.value(t)
	}
}

func (d *decoder) top() *frame {
	if len(d.stack) == 0 {
		return nil
	}
	return d.stack[len(d.stack)-1]
}

func (d *decoder) open(isObj bool) error {
	if err := d.count(); err != nil {
		return err
	}
	if d.lim.maxDepth > 0 && len(d.stack)+1 > d.lim.maxDepth {
		return d.fail(errDepth, "")
	}
	f := &frame{isObj: isObj, name: d.childName()}
	if isObj {
		f.obj = map[string]any{}
	} else {
		f.arr = []any{}
	}
	d.stack = append(d.stack, f)
	return nil
}

// close attaches the finished container to its parent. Containers are
// attached when closed (not when opened) because appending to a parent
// slice would otherwise copy a slice that is still growing.
func (d *decoder) close() error {
	f := d.top()
	d.stack = d.stack[:len(d.stack)-1]
	if f.isObj {
		return d.attach(f.obj)
	}
	return d.attach(f.arr)
}

func (d *decoder) key(f *frame, k string) error {
	f.key = k // set first so an error points at the duplicate
	if _, dup := f.obj[k]; dup {
		return d.fail(errDuplicateKey, k)
	}
	if d.lim.foldKeys {
		fk := foldKey(k)
		if f.folded[fk] {
			return d.fail(errCaseDuplicateKey, k)
		}
		if f.folded == nil {
			f.folded = map[string]bool{}
		}
		f.folded[fk] = true
	}
	f.haveKey = true
	return nil
}

// foldKey maps every rune to the smallest rune of its Unicode case-folding
// orbit, so keys equal under strings.EqualFold (K, k and the Kelvin sign
// included) fold to the same string.
func foldKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		smallest := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			smallest = min(smallest, f)
		}
		b.WriteRune(smallest)
	}
	return b.String()
}

func (d *decoder) value(v any) error {
	if err := d.count(); err != nil {
		return err
	}
	return d.attach(v)
}

func (d *decoder) attach(v any) error {
	f := d.top()
	switch {
	case f == nil:
		d.root, d.done = v, true
	case f.isObj:
		f.obj[f.key] = v
		f.haveKey = false
	default:
		f.arr = append(f.arr, v)
	}
	return nil
}

func (d *decoder) count() error {
	d.nodes++
	if d.lim.maxNodes > 0 && d.nodes > d.lim.maxNodes {
		return d.fail(errNodes, "")
	}
	return nil
}

// childName is the pointer token the next value will have in the open
// container: the pending key in an object, the next index in an array.
func (d *decoder) childName() string {
	f := d.top()
	switch {
	case f == nil:
		return ""
	case f.isObj:
		return f.key
	default:
		return strconv.Itoa(len(f.arr))
	}
}

// fail reports an error at the value being read.
func (d *decoder) fail(kind decodeErrKind, detail string) error {
	var path fieldPath
	for i := 1; i < len(d.stack); i++ {
		path = append(path, step{key: d.stack[i].name, index: !d.stack[i-1].isObj})
	}
	if top := d.top(); top != nil {
		path = append(path, step{key: d.childName(), index: !top.isObj})
	}
	return &decodeError{kind: kind, path: path, detail: detail}
}

// numberInRange keeps big.Rat parsing cheap; see maxNumberLen.
func numberInRange(lit string) bool {
	if len(lit) > maxNumberLen {
		return false
	}
	i := strings.IndexAny(lit, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
	return err == nil && exp >= -maxNumberExponent && exp <= maxNumberExponent
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
