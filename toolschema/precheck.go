package toolschema

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// refKeywords are the keywords whose string value is a reference. All of
// them must be local fragments; $recursiveRef is 2019-09's only-"#" form.
var refKeywords = []string{"$dynamicRef", "$recursiveRef", "$ref"}

// dialects are the $schema values the compiler ships metaschemas for,
// without scheme and trailing "#". Anything else would make the compiler
// load the URL, so it is rejected instead.
var dialects = map[string]int{
	"json-schema.org/draft-04/schema":      4,
	"json-schema.org/draft-06/schema":      6,
	"json-schema.org/draft-07/schema":      7,
	"json-schema.org/draft/2019-09/schema": 2019,
	"json-schema.org/draft/2020-12/schema": 2020,
	"json-schema.org/schema":               2020,
}

const defaultDialect = 2020

// refSite is one reference keyword found in the document.
type refSite struct {
	keyword string
	value   string
	at      string // JSON pointer of the object holding the keyword
	holder  map[string]any
}

// target is where a local reference lands.
type target struct {
	ptr string
	v   any
}

// scan is the schema-specific half of the pre-check: it runs on the decoded
// tree (already bounded by depth and node count) and gathers what the cycle
// check needs while rejecting anything that could make the compiler look
// outside the document.
type scan struct {
	root    map[string]any
	dialect int
	maxRefs int
	refs    []refSite
	anchors map[string]target
}

// precheck runs every structural rule on raw and returns the decoded
// document for the compiler, so that the compiler sees exactly what was
// checked (no second parse that could disagree on duplicates or numbers).
func precheck(raw []byte, lim Limits) (*scan, error) {
	if len(raw) > lim.MaxBytes {
		return nil, rejectf("schema is %d bytes, over the limit of %d bytes", len(raw), lim.MaxBytes)
	}
	doc, err := decode(raw, decodeLimits{maxDepth: lim.MaxDepth, maxNodes: lim.MaxNodes})
	if err != nil {
		return nil, schemaDecodeRejection(err, lim)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, rejectf("top-level schema must be a JSON object, got %s", jsonType(doc))
	}
	dialect, err := rootDialect(root)
	if err != nil {
		return nil, err
	}
	s := &scan{root: root, dialect: dialect, maxRefs: lim.MaxRefs, anchors: map[string]target{}}
	if err := s.walk(root, ""); err != nil {
		return nil, err
	}
	if err := s.resolveAll(); err != nil {
		return nil, err
	}
	if err := findRefCycle(s); err != nil {
		return nil, err
	}
	return s, checkFanOut(s)
}

func schemaDecodeRejection(err error, lim Limits) error {
	var de *decodeError
	if !errors.As(err, &de) {
		return rejectf("not valid JSON: %v", err)
	}
	at := where(de.path.pointer())
	switch de.kind {
	case errDepth:
		return rejectf("nested deeper than %d levels at %s", lim.MaxDepth, at)
	case errNodes:
		return rejectf("more than %d JSON values (limit reached at %s)", lim.MaxNodes, at)
	case errDuplicateKey:
		return rejectf("duplicate key %q at %s", de.detail, at)
	case errNumber:
		return rejectf("number %s at %s is out of the supported range", de.detail, at)
	default:
		return rejectf("not valid JSON: %s", de.detail)
	}
}

func rootDialect(root map[string]any) (int, error) {
	uri, ok := root["$schema"].(string)
	if !ok {
		return defaultDialect, nil
	}
	return dialectOf(uri, "")
}

func dialectOf(uri, at string) (int, error) {
	u := strings.TrimSuffix(uri, "#")
	u, ok := strings.CutPrefix(u, "https://")
	if !ok {
		u, ok = strings.CutPrefix(u, "http://")
	}
	if d, known := dialects[u]; ok && known {
		return d, nil
	}
	return 0, rejectf("$schema %q at %s: unsupported dialect (use draft-04, -06, -07, 2019-09 or 2020-12 from json-schema.org)", truncate(uri, 100), where(at))
}

// walk visits every value. Keys are visited in sorted order so that the
// first reported problem does not depend on map iteration order.
func (s *scan) walk(v any, ptr string) error {
	switch v := v.(type) {
	case map[string]any:
		keys := sortedKeys(v)
		for _, k := range keys {
			if err := s.keyword(v, k, ptr); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := s.walk(v[k], ptr+"/"+escapeToken(k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := s.walk(e, ptr+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyword checks one key of an object. Only string values matter: a
// property *named* "$ref" has an object value and is not a reference.
func (s *scan) keyword(obj map[string]any, k, ptr string) error {
	str, ok := obj[k].(string)
	if !ok {
		return nil
	}
	switch {
	case slices.Contains(refKeywords, k):
		return s.ref(refSite{keyword: k, value: str, at: ptr, holder: obj})
	case k == "$id" || (k == "id" && s.dialect == 4):
		return s.id(k, str, obj, ptr)
	case k == "$anchor" || k == "$dynamicAnchor":
		s.anchor(str, obj, ptr)
	case k == "$schema":
		_, err := dialectOf(str, ptr)
		return err
	}
	return nil
}

func (s *scan) ref(site refSite) error {
	if len(s.refs) >= s.maxRefs {
		return rejectf("more than %d $ref/$dynamicRef/$recursiveRef (limit reached at %s)", s.maxRefs, where(site.at))
	}
	if !strings.HasPrefix(site.value, "#") {
		return rejectf("%s %q at %s: only local fragment refs (#/...) are allowed", site.keyword, truncate(site.value, 100), where(site.at))
	}
	s.refs = append(s.refs, site)
	return nil
}

// id accepts only fragment ids ("#name", the draft-06/07 way of declaring an
// anchor). Any other $id sets a base URI: "#/..." would then mean a
// different document, which the pre-check cannot follow and the compiler
// would try to load.
func (s *scan) id(k, id string, obj map[string]any, ptr string) error {
	if !strings.HasPrefix(id, "#") {
		return rejectf("%s %q at %s: only fragment ids (#name) are allowed; a base URI would make local refs point outside this schema", k, truncate(id, 100), where(ptr))
	}
	if name := id[1:]; name != "" {
		s.anchor(name, obj, ptr)
	}
	return nil
}

// anchor records the first declaration; duplicates are the compiler's to reject.
func (s *scan) anchor(name string, obj map[string]any, ptr string) {
	if _, seen := s.anchors[name]; !seen {
		s.anchors[name] = target{ptr: ptr, v: obj}
	}
}

// resolveAll makes sure every reference lands inside the document, so the
// compiler never has a reason to look elsewhere.
func (s *scan) resolveAll() error {
	for _, r := range s.refs {
		if _, ok := s.resolve(r.value); !ok {
			return rejectf("%s %q at %s: target not found in this schema", r.keyword, truncate(r.value, 100), where(r.at))
		}
	}
	return nil
}

// resolve finds the target of a local reference: "#" (the root),
// "#/json/pointer" (percent-encoded per RFC 6901 section 6) or "#anchor".
func (s *scan) resolve(ref string) (target, bool) {
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	switch {
	case err != nil:
		return target{}, false
	case frag == "":
		return target{ptr: "", v: s.root}, true
	case strings.HasPrefix(frag, "/"):
		return s.follow(strings.Split(frag[1:], "/"))
	default:
		t, ok := s.anchors[frag]
		return t, ok
	}
}

// follow walks pointer tokens from the root, returning the canonical
// pointer so that the same location always has the same name.
func (s *scan) follow(tokens []string) (target, bool) {
	var cur any = s.root
	var sb strings.Builder
	for _, raw := range tokens {
		tok := unescapeToken(raw)
		next, ok := child(cur, tok)
		if !ok {
			return target{}, false
		}
		cur = next
		sb.WriteString("/" + escapeToken(tok))
	}
	return target{ptr: sb.String(), v: cur}, true
}

func child(v any, tok string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		next, ok := c[tok]
		return next, ok
	case []any:
		i, ok := arrayIndex(tok, len(c))
		if !ok {
			return nil, false
		}
		return c[i], true
	}
	return nil, false
}

// arrayIndex accepts RFC 6901 indices only: digits, no leading zero, in range.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.Trim(tok, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(tok)
	return i, err == nil && i < n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
