package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// JSON is raw with every string value redacted (keys are left as they are:
// a secret is a value), and what was replaced. Numbers keep their exact
// digits. raw itself is returned when no pattern's keyword appears in it
// and it holds no escape that could hide one (\u, \/); otherwise it is
// decoded, and re-encoded only when something was replaced. It fails only
// on invalid JSON.
func (r *Redactor) JSON(raw []byte) ([]byte, Counts, error) {
	if r == nil || !r.mayMatchJSON(raw) {
		return raw, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, err
	}
	var counts Counts
	v = r.value(v, &counts)
	if counts == nil {
		return raw, nil, nil
	}
	out, err := json.Marshal(v)
	return out, counts, err
}

// mayMatchJSON: a keyword appears in raw as written, or an escape could
// spell one out only once decoded.
func (r *Redactor) mayMatchJSON(raw []byte) bool {
	return hidingEscape(raw) || r.scan.scan(unsafeString(raw)) != 0
}

// hidingEscape reports a JSON escape that could hide a keyword: \/, or a
// \u escape other than those of &, <, > and the line and paragraph
// separators, which encoders such as Go's write for safety in HTML and
// which no keyword contains.
func hidingEscape(raw []byte) bool { return hidingEscapeIn(unsafeString(raw)) }

func hidingEscapeIn(raw string) bool {
	if strings.Contains(raw, `\/`) {
		return true
	}
	for i := 0; ; {
		j := strings.Index(raw[i:], `\u`)
		if j < 0 {
			return false
		}
		i += j + 2
		switch esc := string(raw[i:min(i+4, len(raw))]); esc {
		case "0026", "003c", "003C", "003e", "003E", "2028", "2029":
		default:
			return true
		}
	}
}

// Content is String for a text an upstream sent as content, which is
// often JSON: after the text pass (which sees "key": "value" pairs), a text
// that is a JSON value is also redacted value by value, decoded, so that
// an escape (\u0041KIA, postgres:\/\/) cannot hide a secret. Such a text
// is re-encoded only when something in it was replaced.
func (r *Redactor) Content(s string) (string, Counts) {
	out, counts, found := r.redactString(s)
	if r == nil || !mayBeJSON(out) || !found && !hidingEscapeIn(out) {
		return out, counts // nothing a decoding could reveal: no copy, no json.Valid
	}
	raw := []byte(out)
	if !json.Valid(raw) {
		return out, counts
	}
	red, more, err := r.JSON(raw)
	if err != nil || more == nil {
		return out, counts
	}
	counts.Add(more)
	return string(red), counts
}

// mayBeJSON reports whether s starts, after spaces, as a JSON object or
// array does: the texts worth a json.Valid.
func mayBeJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

func (r *Redactor) value(v any, counts *Counts) any {
	switch t := v.(type) {
	case string:
		out, c := r.String(t)
		counts.Add(c)
		return out
	case []any:
		for i := range t {
			t[i] = r.value(t[i], counts)
		}
	case map[string]any:
		for k, child := range t {
			t[k] = r.value(child, counts)
		}
	}
	return v
}
