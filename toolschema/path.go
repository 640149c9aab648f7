package toolschema

import (
	"strconv"
	"strings"
)

// step is one hop into a JSON value: an object key or an array index.
type step struct {
	key   string
	index bool
}

// fieldPath locates a value inside an instance or schema. It renders two
// ways: as a JSON pointer for programs, and as "items[0].sku" for models.
type fieldPath []step

func (p fieldPath) pointer() string {
	var sb strings.Builder
	for _, s := range p {
		sb.WriteString("/" + escapeToken(s.key))
	}
	return sb.String()
}

func (p fieldPath) display() string {
	var sb strings.Builder
	for i, s := range p {
		switch {
		case s.index:
			sb.WriteString("[" + s.key + "]")
		case i > 0:
			sb.WriteString("." + s.key)
		default:
			sb.WriteString(s.key)
		}
	}
	return sb.String()
}

// child returns p extended by key, without aliasing p's backing array.
func (p fieldPath) child(key string, index bool) fieldPath {
	out := make(fieldPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, step{key: key, index: index})
}

// pathIn turns the validator's instance location into a fieldPath, looking
// at the instance to tell array indices from object keys named "0".
func pathIn(instance any, tokens []string) fieldPath {
	path := make(fieldPath, 0, len(tokens))
	cur := instance
	for _, tok := range tokens {
		switch c := cur.(type) {
		case []any:
			path = append(path, step{key: tok, index: true})
			i, _ := strconv.Atoi(tok)
			cur = elem(c, i)
		case map[string]any:
			path = append(path, step{key: tok})
			cur = c[tok]
		default:
			path = append(path, step{key: tok})
			cur = nil
		}
	}
	return path
}

func elem(arr []any, i int) any {
	if i < 0 || i >= len(arr) {
		return nil
	}
	return arr[i]
}

// escapeToken escapes one JSON pointer token (RFC 6901).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// unescapeToken reverses escapeToken; order matters ("~01" is "~1").
func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// where renders a schema location for a rejection reason; deep pointers
// are cut so a reason stays one readable line.
func where(ptr string) string {
	if ptr == "" {
		return "the top level"
	}
	return truncate(ptr, 120)
}
