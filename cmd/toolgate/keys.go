package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/toolgate/toolgate/authn"
)

func runKeys(args []string) int {
	if len(args) == 3 && args[0] == "new" && args[1] == "--approver" {
		return newApproverKey(args[2])
	}
	if len(args) != 2 || args[0] != "new" {
		fmt.Fprintln(os.Stderr, "usage: toolgate keys new <principal> | toolgate keys new --admin | toolgate keys new --approver <name>")
		return 2
	}
	if args[1] == "--admin" {
		return newAdminKey()
	}
	principal := args[1]
	if !validName(principal) {
		fmt.Fprintln(os.Stderr, "toolgate: a principal must be non-empty, without surrounding spaces, '$' or ','")
		return 2
	}
	key, hash, err := authn.NewKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		return 1
	}
	fmt.Printf("API key for %s (shown once; toolgate stores only its hash):\n\n  %s\n\n", principal, key)
	fmt.Printf("Add under auth.api_keys in toolgate.yaml:\n\n  - {principal: %s, sha256: \"%s\"}\n", principal, hash)
	return 0
}

// newAdminKey mints the admin API credential (approvals), which is not a
// principal: it goes under admin.key_sha256.
func newAdminKey() int {
	key, hash, err := authn.NewKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		return 1
	}
	fmt.Printf("Admin API key (shown once; toolgate stores only its hash):\n\n  %s\n\n", key)
	fmt.Printf("Add to toolgate.yaml:\n\n  admin: {key_sha256: \"%s\"}\n\nand give the key to approvers as TOOLGATE_ADMIN_KEY.\n", hash)
	return 0
}

func validName(name string) bool {
	return name != "" && strings.TrimSpace(name) == name && !strings.ContainsAny(name, "$,")
}

// newApproverKey mints an approver's sign-in key for the approvals console (console.approvers):
// a credential of its own, never an API key, so that an agent's key cannot sign in to decide its
// own calls. What the approver may decide is policy (the approve action), asked about the name.
func newApproverKey(name string) int {
	if !validName(name) {
		fmt.Fprintln(os.Stderr, "toolgate: an approver's name must be non-empty, without surrounding spaces, '$' or ','")
		return 2
	}
	key, hash, err := authn.NewKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		return 1
	}
	fmt.Printf("Console sign-in key for %s (shown once; toolgate stores only its hash):\n\n  %s\n\n", name, key)
	fmt.Printf("Add under console.approvers in toolgate.yaml:\n\n  - {name: %s, sha256: \"%s\"}\n\n", name, hash)
	fmt.Printf("and let the policy say what %s may decide with approve lines (see docs/policy.md), e.g.:\n\n"+
		"  p, supervisor, orders/refund_order, approve, allow\n  g, %s, supervisor\n", name, name)
	return 0
}
