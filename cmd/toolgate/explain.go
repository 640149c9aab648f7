package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/authz"
	authzexplain "github.com/toolgate/toolgate/authz/explain"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// runExplain answers, offline from the config and policy files, whether a
// principal may call a tool and which policy lines decided it. Exit status:
// 0 allowed, 1 denied, 2 usage or file errors, or a principal that neither
// the config nor the policy names (unless --role gives it roles).
func runExplain(args []string) int { return explain(args, os.Stdout) }

func explain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	var roles, attrs multiFlag
	fs.Var(&roles, "role", "a role the credential grants (as a JWT roles claim would); repeatable")
	fs.Var(&attrs, "attr", "a principal attribute name=value for conditions; repeatable (API-key attributes from config are used by default)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		fmt.Fprintln(os.Stderr, "usage: toolgate explain [--config FILE] [--role R] [--attr k=v] <principal> <tool> [json-args]")
		return 2
	}
	cfg, policy, code := loadOffline(*configPath)
	if code != 0 {
		return code
	}
	obj, err := canonicalTool(cfg, fs.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate explain:", err)
		return 2
	}
	subject, err := offlineSubject(cfg, fs.Arg(0), roles, attrs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate explain:", err)
		return 2
	}
	known := knownPrincipal(cfg, policy, subject.Principal)
	if !known && len(roles) == 0 {
		fmt.Fprintln(os.Stderr, "toolgate explain:", unknownPrincipal(*configPath, subject.Principal))
		return 2
	}
	req := authz.Request{Subject: subject, Object: obj, Action: authz.ActCall}
	if fs.NArg() == 3 {
		if !json.Valid([]byte(fs.Arg(2))) {
			fmt.Fprintf(os.Stderr, "toolgate explain: arguments are not valid JSON: %s\n", fs.Arg(2))
			return 2
		}
		req.Args = json.RawMessage(fs.Arg(2))
	}
	x := authzexplain.Explain(policy, req)
	if !known {
		fmt.Fprintf(out, "note: no credential in the config and no policy line names %q: it has only the --role roles\n", subject.Principal)
	}
	printExplanation(out, x, req.Args != nil)
	if x.Allowed {
		return 0
	}
	return 1
}

// loadOffline reads the config and the policy (linted against the
// configured servers) without starting anything.
func loadOffline(path string) (*config.Config, *authz.Policy, int) {
	cfg, err := config.Load(path)
	if err != nil {
		printProblems(os.Stderr, "invalid configuration", err)
		return nil, nil, 2
	}
	policy, err := authz.LoadPolicy(cfg.ModelPath(), cfg.PolicyPath(), gateway.PolicyOptions(cfg))
	if err != nil {
		printProblems(os.Stderr, "invalid policy", err)
		return nil, nil, 2
	}
	return cfg, policy, 0
}

// canonicalTool accepts a canonical "<server>/<tool>" or a client-facing
// name, mapped through the configured prefixes (offline: no upstream is
// asked what it lists).
func canonicalTool(cfg *config.Config, name string) (string, error) {
	if server, tool, ok := strings.Cut(name, "/"); ok {
		if cfg.Servers[server] == nil {
			return "", fmt.Errorf("no server %q in mcpServers", server)
		}
		return server + "/" + tool, nil
	}
	for _, server := range cfg.ServerNames() {
		for tool, t := range cfg.Servers[server].Tools {
			if t != nil && t.Override != nil && t.Override.Name == name {
				return server + "/" + tool, nil // an override's name is verbatim: no prefix to strip
			}
		}
	}
	best, bestPrefix := "", ""
	for _, server := range cfg.ServerNames() {
		prefix := cfg.Servers[server].ToolPrefix()
		if prefix != "" && strings.HasPrefix(name, prefix) && len(prefix) > len(bestPrefix) {
			best, bestPrefix = server, prefix
		}
	}
	if best == "" {
		return "", fmt.Errorf("%q matches no server prefix; name the tool as <server>/<tool>", name)
	}
	tool := strings.TrimPrefix(name, bestPrefix)
	if t := cfg.Servers[best].Tools[tool]; t != nil && t.Override != nil && t.Override.Name != "" {
		return "", fmt.Errorf("%q is renamed %q (mcpServers.%s.tools.%s.override.name): a call by its old name answers tool_not_found", name, t.Override.Name, best, tool)
	}
	return best + "/" + tool, nil
}

// knownPrincipal reports whether the config names principal (an API key's, auth.stdio_principal,
// auth.allow_anonymous) or the policy does (a g line gives it a role; a role's name counts too, and
// the policy's own answer then says a principal may not be named so). Any other name has no rights
// of its own: answering for it as if it were a principal would hide a misspelling.
func knownPrincipal(cfg *config.Config, policy *authz.Policy, principal string) bool {
	return slices.Contains(gateway.PolicyOptions(cfg).Principals, principal) ||
		policy.IsRole(principal) || len(policy.RolesOf(authz.Subject{Principal: principal})) > 0
}

// unknownPrincipal is the error for a principal knownPrincipal does not know.
func unknownPrincipal(configPath, principal string) error {
	return fmt.Errorf("unknown principal %q: no API key, auth.stdio_principal or auth.allow_anonymous in %s and no g line of the policy names it, "+
		"so it has no rights (check the spelling; for a principal whose token grants roles, name them with --role)", principal, configPath)
}

// offlineSubject is the subject explain reasons about: the principal, the
// attributes its API key carries in config (overridable), and any roles a
// credential would add.
func offlineSubject(cfg *config.Config, principal string, roles, attrs []string) (authz.Subject, error) {
	s := authz.Subject{Principal: principal, Roles: roles, Attrs: map[string]string{}}
	for _, k := range cfg.Auth.APIKeys {
		if k.Principal == principal {
			for name, v := range k.Attributes {
				s.Attrs[name] = v
			}
		}
	}
	for _, a := range attrs {
		name, v, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return s, fmt.Errorf("--attr %q: expected name=value", a)
		}
		s.Attrs[name] = v
	}
	return s, nil
}

func printExplanation(w io.Writer, x authzexplain.Explanation, withArgs bool) {
	decision := "deny"
	if x.Allowed {
		decision = "allow"
	}
	fmt.Fprintf(w, "decision: %s (%s, %s, %s)\nwhy: %s\n", decision, x.Principal, x.Action, x.Object, x.Summary)
	roles := "(none)"
	if len(x.Roles) > 0 {
		roles = strings.Join(x.Roles, ", ")
	}
	fmt.Fprintf(w, "roles: %s\n", roles)
	if !withArgs && !x.Allowed && x.Visible {
		fmt.Fprintln(w, "note: an allow line has a condition on the arguments; pass them as a third argument to decide it")
	}
	if len(x.Lines) == 0 {
		fmt.Fprintln(w, "no policy line matches: denied by default")
		return
	}
	fmt.Fprintln(w, "matching lines:")
	for _, l := range x.Lines {
		fmt.Fprintf(w, "  %s %-20s %s%s\n", marker(l), l.Rule, l.Text, condNote(l))
	}
	if len(x.DecidedBy) > 0 {
		sort.Strings(x.DecidedBy)
		fmt.Fprintf(w, "decided by: %s\n", strings.Join(x.DecidedBy, ", "))
	}
}

func marker(l authzexplain.Line) string {
	switch {
	case l.Decisive:
		return "=>"
	case l.Applied:
		return " +"
	}
	return "  "
}

func condNote(l authzexplain.Line) string {
	if l.CondResult == "" {
		return ""
	}
	return "    [condition " + l.CondResult + "]"
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
