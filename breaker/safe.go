package breaker

// RetrySafe decides whether a tool may be called again after an attempt whose outcome is unknown
// (docs/design.md, Failure semantics). An explicit operator statement wins, true or false (explicit and
// safe, as returned by config.Config.ToolRetrySafe). Otherwise the tool is retry-safe only when its
// server is trusted and its annotations say readOnlyHint or idempotentHint. Annotations from an untrusted
// server never make a tool retry-safe, and a missing annotation (nil) counts as false, the MCP default
// for both hints.
func RetrySafe(explicit, safe, trusted bool, readOnly, idempotent *bool) bool {
	if explicit {
		return safe
	}
	return trusted && (isTrue(readOnly) || isTrue(idempotent))
}

func isTrue(b *bool) bool { return b != nil && *b }
