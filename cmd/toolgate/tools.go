package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/upstreams"
)

// runTools prints the catalog as one principal sees it: it connects to the
// upstreams as serve would, then filters with the policy files.
func runTools(args []string) int { return tools(args, os.Stdout) }

func tools(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	as := fs.String("as", "", "show only the tools this principal may call (default: every tool)")
	var roles multiFlag
	fs.Var(&roles, "role", "a role the credential grants (as a JWT roles claim would); repeatable")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: toolgate tools [--config FILE] [--as PRINCIPAL] [--role R]")
		return 2
	}
	cfg, policy, code := loadOffline(*configPath)
	if code != 0 {
		return code
	}
	if *as != "" && len(roles) == 0 && !knownPrincipal(cfg, policy, *as) {
		fmt.Fprintln(os.Stderr, "toolgate tools:", unknownPrincipal(*configPath, *as))
		return 2
	}
	store, err := gateway.OpenPins(cfg, pins.WithoutRecording())
	if err != nil {
		printProblems(os.Stderr, "tool pins", err)
		return 2
	}
	set, err := upstreams.Start(context.Background(), gateway.UpstreamServers(cfg), slog.New(slog.DiscardHandler), upstreams.WithPins(store))
	if err != nil {
		printProblems(os.Stderr, "tool catalog", err)
		return 2
	}
	defer set.Close()
	var subject *authz.Subject
	if *as != "" {
		s, _ := offlineSubject(cfg, *as, roles, nil)
		subject = &s
	}
	printTools(out, set.Catalog(), policy, subject)
	return 0
}

func printTools(w io.Writer, cat *upstreams.Catalog, policy *authz.Policy, subject *authz.Subject) {
	shown := 0
	for _, t := range cat.Tools() {
		if subject != nil && !policy.Visible(*subject, t.ID) {
			continue
		}
		shown++
		fmt.Fprintf(w, "%-40s %-40s %s\n", t.Name, t.ID, strings.TrimSpace(hintsOf(t)+" "+overrideOf(t)))
	}
	for server, why := range cat.Down() {
		fmt.Fprintf(w, "(server %s is unavailable: %s)\n", server, why)
	}
	fmt.Fprintf(w, "%d of %d tools\n", shown, len(cat.Tools()))
}

func hintsOf(t *upstreams.Tool) string {
	var h []string
	a := t.Annotations
	for _, f := range []struct {
		name string
		v    *bool
	}{{"read-only", a.ReadOnlyHint}, {"destructive", a.DestructiveHint}, {"idempotent", a.IdempotentHint}, {"open-world", a.OpenWorldHint}} {
		if f.v != nil && *f.v {
			h = append(h, f.name)
		}
	}
	return strings.Join(h, ",")
}

// overrideOf says that what a client sees of t is the operator's override
// (mcpServers.<server>.tools.<tool>.override), and which parameters the
// gateway fixes; "" for a tool as its server lists it.
func overrideOf(t *upstreams.Tool) string {
	if t.Override == nil {
		return ""
	}
	s := "overridden"
	if hidden := t.Override.Hidden(); len(hidden) > 0 {
		s += " (fixed: " + strings.Join(hidden, ", ") + ")"
	}
	return s
}
