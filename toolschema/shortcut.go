package toolschema

import (
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonscan"
)

// decodeUsual decodes the arguments most calls carry, an object whose keys
// are plain ASCII strings and whose strings carry no escapes, on one
// cursor (internal/jsonscan), into the tree decode builds. It reports
// false for anything else, and for anything decode would refuse (a
// repeated key, keys equal but for case, a number out of range, nesting
// past maxInstanceDepth), so that decode runs and words the refusal.
//
// decode goes through json.Decoder.Token, which allocates per token and
// took 14,000 of the gateway's 197,000 instructions per call on
// {"message":"ping 1"} (callgrind); this takes a sixth of that.
func decodeUsual(raw []byte) (map[string]any, bool) {
	u := usualDecoder{c: jsonscan.NewCursor(raw)}
	if !u.c.Next('{') {
		return nil, false
	}
	m, ok := u.object(1)
	if !ok || !u.c.AtEnd() {
		return nil, false
	}
	return m, true
}

// usualDecoder is decodeUsual's state: the cursor.
type usualDecoder struct{ c jsonscan.Cursor }

// maxUsualMembers bounds the members of one object decodeUsual takes:
// keys equal but for case are found by comparing each with the ones
// before it.
const maxUsualMembers = 32

// object reads the members of an object whose { was read, at nesting
// level (the arguments' object is 1).
func (u *usualDecoder) object(level int) (map[string]any, bool) {
	if level > maxInstanceDepth {
		return nil, false
	}
	m := map[string]any{}
	if u.c.Next('}') {
		return m, true
	}
	var keys [maxUsualMembers]string
	for n := 0; ; n++ {
		key, ok := u.c.Key()
		if !ok || n == maxUsualMembers {
			return nil, false
		}
		k := string(key)
		for _, before := range keys[:n] {
			if strings.EqualFold(before, k) { // a plain key is ASCII: decode's foldKey is EqualFold here
				return nil, false
			}
		}
		keys[n] = k
		if m[k], ok = u.value(level); !ok {
			return nil, false
		}
		if more, fine := u.c.After(true); !fine {
			return nil, false
		} else if !more {
			return m, true
		}
	}
}

// array reads the values of an array whose [ was read.
func (u *usualDecoder) array(level int) ([]any, bool) {
	if level > maxInstanceDepth {
		return nil, false
	}
	arr := []any{}
	if u.c.Next(']') {
		return arr, true
	}
	for {
		u.c.Space()
		v, ok := u.value(level)
		if !ok {
			return nil, false
		}
		arr = append(arr, v)
		switch {
		case u.c.Next(']'):
			return arr, true
		case !u.c.Next(','):
			return nil, false
		}
	}
}

// value reads one value inside a container at level, the cursor on it.
func (u *usualDecoder) value(level int) (any, bool) {
	if s, ok := u.c.TextString(); ok {
		return string(s), true
	}
	if u.c.Next('{') {
		return u.object(level + 1)
	}
	if u.c.Next('[') {
		return u.array(level + 1)
	}
	v := u.c.Value()
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	case "null":
		return nil, true
	}
	if !jsonNumber(v) || !numberInRange(string(v)) {
		return nil, false // a string with escapes, or not JSON: decode's
	}
	return json.Number(v), true
}

// jsonNumber reports whether b is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(b)
}

// digits is the index after the run of digits starting at i.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
