package toolschema

// Limits caps the work a single upstream schema may cause before it is
// compiled. A zero field means "use the default"; the defaults are the only
// numbers in this package that need tuning, so they live here together:
//
//	MaxBytes  262144 bytes (256 KiB) of raw schema JSON
//	MaxDepth  64 levels of nested objects/arrays (the top-level object is level 1)
//	MaxNodes  20000 JSON values (objects, arrays, strings, numbers, booleans, nulls; keys not counted)
//	MaxRefs   256 occurrences of $ref, $dynamicRef and $recursiveRef together
//
// Raising them is safe only as far as the compiler stays fast: a 1000-deep
// allOf (12 KB) takes seconds to compile, which is why depth is capped well
// below that.
type Limits struct {
	MaxBytes int
	MaxDepth int
	MaxNodes int
	MaxRefs  int
}

const (
	defaultMaxBytes = 256 << 10
	defaultMaxDepth = 64
	defaultMaxNodes = 20000
	defaultMaxRefs  = 256
)

// withDefaults fills zero (or negative) fields so callers can pass Limits{}.
func (l Limits) withDefaults() Limits {
	l.MaxBytes = orDefault(l.MaxBytes, defaultMaxBytes)
	l.MaxDepth = orDefault(l.MaxDepth, defaultMaxDepth)
	l.MaxNodes = orDefault(l.MaxNodes, defaultMaxNodes)
	l.MaxRefs = orDefault(l.MaxRefs, defaultMaxRefs)
	return l
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
