package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams"
)

// runCheck validates the configuration, the policy and (unless --offline)
// every upstream's tools, reporting every problem it finds.
func runCheck(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	offline := fs.Bool("offline", false, "do not start or contact upstreams")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return check(*configPath, *offline, os.Stdout)
}

func check(path string, offline bool, out io.Writer) int {
	problems := 0
	cfg, err := config.Load(path)
	if err != nil {
		printProblems(out, "configuration", err)
		return 1
	}
	policy, err := authz.LoadPolicy(cfg.ModelPath(), cfg.PolicyPath(), gateway.PolicyOptions(cfg))
	if err != nil {
		printProblems(out, "policy", err)
		problems++
	} else {
		for _, w := range policy.Warnings() {
			fmt.Fprintf(out, "warning: %s\n", w)
		}
	}
	if path := cfg.ShadowPolicyPath(); path != "" {
		// As serve loads it: the live model and options, every problem with its line.
		if shadow, err := authz.LoadPolicy(cfg.ModelPath(), path, gateway.PolicyOptions(cfg)); err != nil {
			printProblems(out, "shadow policy (authz.shadow_policy)", err)
			problems++
		} else {
			for _, w := range shadow.Warnings() {
				fmt.Fprintf(out, "warning: shadow policy: %s\n", w)
			}
		}
	}
	// The JWKS file is read here (a URL is fetched, bounded), as serve would.
	if auth, err := authn.New(context.Background(), gateway.AuthnOptions(cfg), slog.New(slog.DiscardHandler)); err != nil {
		printProblems(out, "authentication", err)
		problems++
	} else {
		auth.Close()
	}
	if !offline {
		problems += checkState(cfg, out)
		problems += checkUpstreams(cfg, out)
	}
	if problems > 0 {
		return 1
	}
	fmt.Fprintf(out, "ok: %s\n", cfg.File)
	return 0
}

// checkState pings the shared store, when state.redis is set: serve
// starts without it (not ready), so check is where an operator learns of a
// wrong address or password before traffic does.
func checkState(cfg *config.Config, out io.Writer) int {
	if !cfg.StateShared() {
		return 0
	}
	err := state.Ping(context.Background(), state.Options{URL: cfg.StateRedisURL(), DialTimeout: cfg.StateDialTimeout(), OpTimeout: cfg.StateOpTimeout()})
	if err != nil {
		fmt.Fprintf(out, "state.redis: unreachable: %s\n", err)
		return 1
	}
	fmt.Fprintf(out, "state.redis: reachable\n")
	return 0
}

// checkUpstreams connects to every upstream as serve would, and reports
// servers that are down and tools that would be quarantined.
func checkUpstreams(cfg *config.Config, out io.Writer) int {
	store, err := gateway.OpenPins(cfg, pins.WithoutRecording())
	if err != nil {
		printProblems(out, "tool pins", err)
		return 1
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := upstreams.Start(context.Background(), gateway.UpstreamServers(cfg), quiet, upstreams.WithPins(store))
	if err != nil {
		printProblems(out, "tool catalog", err)
		return 1
	}
	defer set.Close()
	cat := set.Catalog()
	problems := 0
	down := cat.Down()
	names := make([]string, 0, len(down))
	for name := range down {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if cfg.Servers[name].AuthMode() == config.AuthOAuth {
			// Only a serving gateway holds users' tokens: such an upstream is listed once a user connects.
			fmt.Fprintf(out, "warning: mcpServers.%s: not checked: it acts as each user (auth mode oauth) and is listed once one connects\n", name)
			continue
		}
		fmt.Fprintf(out, "mcpServers.%s: unavailable: %s\n", name, down[name])
		problems++
	}
	for _, q := range cat.Quarantined() {
		fmt.Fprintf(out, "mcpServers.%s: tool %q quarantined (not listed, not callable): %s\n", q.Server, q.Upstream, q.Reason)
		problems++
	}
	for _, ch := range cat.Changed() {
		fmt.Fprintf(out, "%s: blocked by pinning: %s (toolgate pins diff; toolgate pins approve %s)\n", ch.ID, ch.Reason(), ch.Name)
		problems++
	}
	for _, f := range cat.Findings() {
		if f.Action == upstreams.ActionQuarantined {
			continue // reported with the quarantined tools above
		}
		fmt.Fprintf(out, "warning: %s %s: %s: %s (%s)\n", f.ID(), f.Where, f.Kind, f.Detail, f.Action)
	}
	for _, w := range cat.Warnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	warnUnmatchedToolsets(cfg, cat, out)
	fmt.Fprintf(out, "%d tools available from %d servers\n", len(cat.Tools()), len(cfg.ServerNames())-len(down))
	return problems
}

// warnUnmatchedToolsets warns of each toolset pattern that matches no tool
// the servers listed (those of a server that is down are not judged): a
// typo there narrows the toolset without a word.
func warnUnmatchedToolsets(cfg *config.Config, cat *upstreams.Catalog, out io.Writer) {
	var ids []string
	for _, t := range cat.Tools() {
		ids = append(ids, t.ID)
	}
	for _, ch := range cat.Changed() {
		ids = append(ids, ch.ID)
	}
	sets := gateway.ToolsetSets(cfg)
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, p := range sets[name].Unmatched(ids) {
			server, _, _ := strings.Cut(p, "/")
			if _, down := cat.Down()[server]; down {
				continue
			}
			fmt.Fprintf(out, "warning: toolsets.%s: pattern %q matches no tool the servers list\n", name, p)
		}
	}
}
