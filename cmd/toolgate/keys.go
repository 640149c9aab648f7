package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/toolgate/toolgate/authz"
)

func runKeys(args []string) int {
	if len(args) != 2 || args[0] != "new" {
		fmt.Fprintln(os.Stderr, "usage: toolgate keys new <principal>")
		return 2
	}
	principal := args[1]
	if principal == "" || strings.TrimSpace(principal) != principal || strings.ContainsAny(principal, "$,") {
		fmt.Fprintln(os.Stderr, "toolgate: a principal must be non-empty, without surrounding spaces, '$' or ','")
		return 2
	}
	key, hash, err := authz.NewKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		return 1
	}
	fmt.Printf("API key for %s (shown once; toolgate stores only its hash):\n\n  %s\n\n", principal, key)
	fmt.Printf("Add under auth.api_keys in toolgate.yaml:\n\n  - {principal: %s, sha256: \"%s\"}\n", principal, hash)
	return 0
}
