package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// fixedValue is one hidden parameter: its path and its compact JSON value.
type fixedValue struct {
	path  []string
	value []byte
}

// member is one member of a JSON object as sent: its key, unescaped, and
// where its value's bytes are in the object.
type member struct {
	key        string
	start, end int
}

// members lists the members of obj, a JSON object, in order.
func members(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if start < 0 || !bytes.Equal(obj[start:end], raw) {
			return nil, errors.New("arguments could not be read")
		}
		out = append(out, member{key: key, start: start, end: end})
	}
	return out, nil
}

var errNotObject = errors.New("arguments must be a JSON object")

// setPath returns obj, a JSON object without surrounding space, with the
// value at path set to value: it replaces what the client sent under the
// last name, in place, or is added last; the objects on the way are
// entered where the client sent them (null counts as absent), or created.
// The client's other bytes stay as sent, except in an object that has the
// last name twice: that one is written anew, compact, without any copy of
// it, so that no reader can take the client's copy for the operator's.
func setPath(obj []byte, path []string, value []byte) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	var same []member
	for _, m := range ms {
		if m.key == path[0] {
			same = append(same, m)
		}
	}
	if len(path) > 1 {
		switch {
		case len(same) > 1:
			return nil, fmt.Errorf("argument %q is sent more than once", path[0])
		case len(same) == 1 && string(obj[same[0].start:same[0].end]) != "null":
			m := same[0]
			inner, err := setPath(obj[m.start:m.end], path[1:], value)
			if errors.Is(err, errNotObject) {
				return nil, fmt.Errorf("argument %q must be an object", path[0])
			}
			if err != nil {
				return nil, err
			}
			return splice(obj, m.start, m.end, inner), nil
		}
		value = nest(path[1:], value)
	}
	switch len(same) {
	case 0:
		k, _ := json.Marshal(path[0])
		added := append(append(k, ':'), value...)
		if len(ms) == 0 {
			return append(append([]byte{'{'}, added...), '}'), nil
		}
		last := bytes.LastIndexByte(obj, '}')
		return append(append(append(append([]byte{}, obj[:last]...), ','), added...), '}'), nil
	case 1:
		return splice(obj, same[0].start, same[0].end, value), nil
	}
	return rebuild(obj, ms, path[0], value), nil
}

// rebuild writes obj anew, compact, without any member named key, and with
// key: value last.
func rebuild(obj []byte, ms []member, key string, value []byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, m := range ms {
		if m.key == key {
			continue
		}
		mk, _ := json.Marshal(m.key)
		b.Write(mk)
		b.WriteByte(':')
		b.Write(obj[m.start:m.end])
		b.WriteByte(',')
	}
	k, _ := json.Marshal(key)
	b.Write(k)
	b.WriteByte(':')
	b.Write(value)
	b.WriteByte('}')
	return b.Bytes()
}

// nest is value inside objects named by path: {"a":{"b":value}}.
func nest(path []string, value []byte) []byte {
	var b strings.Builder
	for _, p := range path {
		k, _ := json.Marshal(p)
		b.WriteByte('{')
		b.Write(k)
		b.WriteByte(':')
	}
	b.Write(value)
	b.WriteString(strings.Repeat("}", len(path)))
	return []byte(b.String())
}

func splice(obj []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(obj)-(end-start)+len(with))
	return append(append(append(out, obj[:start]...), with...), obj[end:]...)
}
