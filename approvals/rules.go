package approvals

import (
	"time"

	"github.com/casbin/casbin/v2/util"
)

// Rule is what the configuration (approvals.rules) says about the calls held for some tools: how
// long their requests live, and (by its index, see Guard.OnCreated) who is told when one is created.
// Which calls are held is the policy's a lines; a Rule only settles what happens to them.
type Rule struct {
	// Tools are patterns of canonical tool IDs, matched as the policy matches objects (keyMatch:
	// "orders/refund_order", "orders/*").
	Tools []string
	// TTL is how long a request lives, and then its approval or denial; 0: approvals.ttl.
	TTL time.Duration
}

// Rules are the configured rules, in file order: the first whose Tools match a held call's tool
// applies to it; none may match.
type Rules []Rule

// For is the index of the first rule matching tool, or -1.
func (rs Rules) For(tool string) int {
	for i, r := range rs {
		for _, pattern := range r.Tools {
			if util.KeyMatch(tool, pattern) {
				return i
			}
		}
	}
	return -1
}
