// Command toolgate is the MCP gateway: one binary for serving, checking
// configuration, calling tools as an admin, minting API keys and running the
// built-in demo upstream. Each subcommand is a thin layer of flags over the
// packages that do the work.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `toolgate — a Tool Execution Layer for MCP

Usage:
  toolgate serve [--config toolgate.yaml]           serve Streamable HTTP on listen.http (/mcp)
  toolgate serve --stdio [--config toolgate.yaml]   serve one client on stdin/stdout
  toolgate check [--config toolgate.yaml] [--offline]   validate config, model, policy and upstream tools
  toolgate explain [--config F] [--role R] [--attr k=v] <principal> <tool> [json-args]
                                                     why a principal may or may not call a tool (offline)
  toolgate policy test [--config F] [--policy P] CASES.yaml | diff --against CANDIDATE.csv [--audit TRAIL]
                                                     test cases for the policy; replay the trail through a candidate
  toolgate tools [--config F] [--as PRINCIPAL]       the catalog, as one principal sees it
  toolgate call [--url URL] [--key KEY] <tool> [json-args]   call a tool through a running gateway
  toolgate call --list [--url URL] [--key KEY]       list the tools the key may call
  toolgate pins diff | approve <tool>|--all          review and approve tools whose definition changed
  toolgate approvals [--config F | --url URL] list | approve ID | deny ID
                                                     decide calls that wait for a human approval
  toolgate credentials list | set <upstream> <principal> | revoke <upstream> <principal> | rekey | newkey
                                                     the per-user upstream credentials (set reads the secret from stdin)
  toolgate audit verify FILE...                      check an audit trail's hash chain (oldest file first)
  toolgate audit verify --config F                   check every trail of F's audit.file (the file and its slots)
  toolgate import <file> [--out DIR] [--force]       toolgate.yaml and a starter policy from a client's MCP config
  toolgate keys new <principal>                      mint an API key and print its config line
  toolgate keys new --admin                          mint the admin API key (admin.key_sha256)
  toolgate keys new --approver <name>                mint an approver's console sign-in key (console.approvers)
  toolgate demo-orders                               run the built-in demo upstream on stdio
  toolgate version
`

func main() {
	exposeSelf()
	os.Exit(run(os.Args[1:]))
}

// exposeSelf sets TOOLGATE_SELF to this binary's path (unless already set)
// so a config can start toolgate's own subcommands as upstreams, such as
// the demo's `command: "${TOOLGATE_SELF}"`, without toolgate on PATH.
func exposeSelf() {
	if os.Getenv("TOOLGATE_SELF") != "" {
		return
	}
	if self, err := os.Executable(); err == nil {
		os.Setenv("TOOLGATE_SELF", self)
	}
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:])
	case "check":
		return runCheck(args[1:])
	case "call":
		return runCall(args[1:])
	case "explain":
		return runExplain(args[1:])
	case "policy":
		return runPolicy(args[1:])
	case "tools":
		return runTools(args[1:])
	case "pins":
		return runPins(args[1:])
	case "audit":
		return auditCommand(args[1:], os.Stdout, os.Stderr)
	case "approvals":
		return runApprovals(args[1:])
	case "credentials":
		return runCredentials(args[1:])
	case "import":
		return runImport(args[1:])
	case "keys":
		return runKeys(args[1:])
	case "demo-orders":
		return runDemoOrders(args[1:])
	case "version", "--version":
		fmt.Println(version)
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "toolgate: unknown command %q\n\n%s", args[0], usage)
	return 2
}
