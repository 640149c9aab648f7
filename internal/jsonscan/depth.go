package jsonscan

// NestsDeeperThan reports whether the JSON in b nests objects and arrays deeper
// than max levels (a top-level object or array is level 1). It scans the
// bytes once, counting brackets outside strings, and decodes nothing: it
// runs on every call, before the schema (pipeline.Validate). It assumes b is JSON (the
// transport parsed it); on anything else it still returns without error,
// and the caller's own check refuses it.
func NestsDeeperThan(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			depth--
		case '"':
			// Skip the string: up to the next quote that no backslash escapes.
			for i++; i < len(b); i++ {
				if b[i] == '\\' {
					i++
				} else if b[i] == '"' {
					break
				}
			}
		}
	}
	return false
}
