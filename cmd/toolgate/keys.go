package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/toolgate/toolgate/authn"
)

func runKeys(args []string) int {
	if len(args) != 2 || args[0] != "new" {
		fmt.Fprintln(os.Stderr, "usage: toolgate keys new <principal> | toolgate keys new --admin")
		return 2
	}
	if args[1] == "--admin" {
		return newAdminKey()
	}
	principal := args[1]
	if principal == "" || strings.TrimSpace(principal) != principal || strings.ContainsAny(principal, "$,") {
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
