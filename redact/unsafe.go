package redact

import "unsafe"

// unsafeString views b as a string without copying it, for substring
// searches of a 1 MB result that must not cost a 1 MB copy. The string
// must not outlive b or be kept.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
