package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// RefuseDenyRemoval reports authz.refuse_deny_removal: whether a policy reload that removes a deny
// line is refused unless the new policy file carries the marker that permits it (authz.Store).
// Default false: such a reload is applied, logged at Warn, audited with the removed lines and counted.
func (c *Config) RefuseDenyRemoval() bool { return c.Authz.RefuseDenyRemoval }

// ShadowPolicyPath is authz.shadow_policy, absolute: a candidate policy evaluated beside the live
// one on every call and never deciding (package authz/shadow); "" when there is none.
func (c *Config) ShadowPolicyPath() string { return c.Authz.ShadowPolicy }

// checkShadowPolicy checks that authz.shadow_policy, when set, names a policy file that exists and
// is not authz.policy itself. Whether it loads with the model is the gateway's check at startup,
// with the live policy's messages (file:line, what to write instead).
func checkShadowPolicy(c *Config, file string, line int) (Problem, bool) {
	p := c.Authz.ShadowPolicy
	if p == "" {
		return Problem{}, true
	}
	bad := func(format string, args ...any) (Problem, bool) {
		return Problem{File: file, Line: line, Key: "authz.shadow_policy", Msg: fmt.Sprintf(format, args...)}, false
	}
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return bad("expected a candidate policy file, got %s, which does not exist", p)
	case err != nil:
		return bad("expected a readable candidate policy file, got %s: %v", p, err)
	case st.IsDir():
		return bad("expected a candidate policy file, got %s, which is a directory", p)
	case p == c.PolicyPath():
		return bad("expected a candidate policy file other than the live one (authz.policy), got %s", p)
	}
	return Problem{}, true
}
