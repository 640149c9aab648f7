package config

// RefuseDenyRemoval reports authz.refuse_deny_removal: whether a policy reload that removes a deny
// line is refused unless the new policy file carries the marker that permits it (authz.Store).
// Default false: such a reload is applied, logged at Warn, audited with the removed lines and counted.
func (c *Config) RefuseDenyRemoval() bool { return c.Authz.RefuseDenyRemoval }
