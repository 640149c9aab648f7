package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/toolsets"
	"github.com/toolgate/toolgate/upstreams"
)

// runTools prints the catalog as one principal sees it: it connects to the
// upstreams as serve would, then filters with the policy files.
func runTools(args []string) int { return tools(args, os.Stdout) }

func tools(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	as := fs.String("as", "", "show only the tools this principal may call (default: every tool)")
	var roles, headers multiFlag
	fs.Var(&roles, "role", "a role the credential grants (as a JWT roles claim would); repeatable")
	toolset := fs.String("toolset", "", "show only this toolset's tools (default: the one toolset_rules pick)")
	client := fs.String("client", "", "the clientInfo name the client gives, for toolset_rules")
	fs.Var(&headers, "header", "an HTTP request header NAME=VALUE the client sends, for toolset_rules; repeatable")
	asJSON := fs.Bool("json", false, "print each tool as clients are given it (name, title, description, annotations, input schema), with its ID and the parameters the gateway fixes")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: toolgate tools [--config FILE] [--as PRINCIPAL] [--role R] [--toolset NAME | --client NAME --header K=V] [--json]")
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
	view, err := toolsetView(cfg, policy, subject, *toolset, *client, headers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate tools:", err)
		return 2
	}
	if *asJSON {
		return printToolsJSON(out, set.Catalog(), policy, subject, view.set)
	}
	if view.line != "" {
		fmt.Fprintln(out, view.line)
	}
	printTools(out, set.Catalog(), policy, subject, view.set)
	return 0
}

// shownTool is one tool as `toolgate tools --json` prints it: what a
// client's tools/list carries, and what only the operator needs.
type shownTool struct {
	Name        string             `json:"name"`
	Title       string             `json:"title,omitempty"`
	Description string             `json:"description"`
	Annotations mcp.ToolAnnotation `json:"annotations"`
	InputSchema json.RawMessage    `json:"inputSchema"`
	ID          string             `json:"id"`
	Fixed       []string           `json:"fixed,omitempty"`
}

// printToolsJSON prints the tools printTools would list, each as clients
// see it after the operator's override: a script (or a person with jq)
// checks the description and schema a model is given.
func printToolsJSON(w io.Writer, cat *upstreams.Catalog, policy *authz.Policy, subject *authz.Subject, set *toolsets.Set) int {
	shown := []shownTool{}
	for _, t := range cat.Tools() {
		if (subject != nil && !policy.Visible(*subject, t.ID)) || !set.Has(t.ID) {
			continue
		}
		st := shownTool{Name: t.Name, Title: t.Title, Description: t.Description, Annotations: t.Annotations, InputSchema: t.InputSchema, ID: t.ID}
		if t.Override != nil {
			st.Fixed = t.Override.Hidden()
		}
		shown = append(shown, st)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(shown); err != nil {
		fmt.Fprintln(os.Stderr, "toolgate tools:", err)
		return 1
	}
	return 0
}

// shownToolset is the toolset `toolgate tools` shows, and the line that
// says which it is and why ("" when the config has no toolsets).
type shownToolset struct {
	set  *toolsets.Set
	line string
}

// toolsetView is the toolset named by --toolset, or the one toolset_rules
// pick for the principal, its roles, --client and --header.
func toolsetView(cfg *config.Config, policy *authz.Policy, subject *authz.Subject, name, client string, headers []string) (shownToolset, error) {
	if name != "" {
		set := gateway.ToolsetSets(cfg)[name]
		if set == nil {
			return shownToolset{}, fmt.Errorf("no toolset %q under toolsets in %s", name, cfg.File)
		}
		return shownToolset{set, "toolset " + name + " (--toolset)" + discoveryNote(set)}, nil
	}
	sel := gateway.ToolsetsFrom(cfg)
	if sel.Empty() {
		return shownToolset{}, nil
	}
	h := http.Header{}
	for _, kv := range headers {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return shownToolset{}, fmt.Errorf("--header %q: expected NAME=VALUE", kv)
		}
		h.Add(k, v)
	}
	req := toolsets.Request{Client: client, Header: h}
	if subject != nil {
		req.Principal = subject.Principal
		req.Roles = func() []string { return policy.RolesOf(*subject) }
	}
	set, rule := sel.Select(req)
	if set == nil {
		return shownToolset{line: "no toolset: no toolset_rules entry matches (every tool the policy allows)"}, nil
	}
	return shownToolset{set, fmt.Sprintf("toolset %s (toolset_rules[%d])%s", set.Name, rule, discoveryNote(set))}, nil
}

func discoveryNote(set *toolsets.Set) string {
	if !set.Discovers() {
		return ""
	}
	return "; discovery: clients are listed " + discovery.SearchTool + " and " + discovery.CallTool + ", which search and call these tools"
}

func printTools(w io.Writer, cat *upstreams.Catalog, policy *authz.Policy, subject *authz.Subject, set *toolsets.Set) {
	shown := 0
	for _, t := range cat.Tools() {
		if (subject != nil && !policy.Visible(*subject, t.ID)) || !set.Has(t.ID) {
			continue
		}
		shown++
		fmt.Fprintf(w, "%-40s %-40s %s\n", t.Name, t.ID, strings.TrimSpace(hintsOf(t)+" "+overrideOf(t)))
	}
	for server, why := range cat.Down() {
		fmt.Fprintf(w, "(server %s is unavailable: %s)\n", server, why)
	}
	// What an operator shaping the catalog needs beside the list: a tool its
	// override (or a name claimed twice) keeps out, and an override that
	// applies to nothing.
	for _, q := range cat.Quarantined() {
		fmt.Fprintf(w, "(tool %s/%s is quarantined, not listed: %s)\n", q.Server, q.Upstream, q.Reason)
	}
	for _, warning := range cat.Warnings() {
		fmt.Fprintf(w, "(warning: %s)\n", warning)
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
