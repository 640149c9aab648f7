package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/authz/policytest"
	"github.com/toolgate/toolgate/authz/replay"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/upstreams"
)

const policyUsage = `usage:
  toolgate policy test [--config F] [--policy P] [--offline] [-v] CASES.yaml
      run policy test cases; exit 0 all passed, 1 a case failed, 2 usage or file errors
  toolgate policy diff --against CANDIDATE.csv [--config F] [--audit TRAIL] [--since T] [--until T] [--json]
      replay the audit trail's calls through the candidate policy; exit 0 nothing changes,
      1 some calls would be decided otherwise or could not be replayed, 2 usage or file errors
  toolgate policy diff --shadow [--config F] [--audit TRAIL] [--since T] [--until T] [--json]
      the calls the shadow policy (authz.shadow_policy) decided otherwise, as the audit trail
      recorded them; exit 0 none, 1 some, 2 usage or file errors
  toolgate policy history [--config F | --audit TRAIL] [-n N]
      the policy reloads in the audit trail, newest first, with what each changed;
      exit 0 listed (none is fine), 2 usage or a trail that cannot be read
`

// runPolicy is `toolgate policy`: tests and diffs of policy changes, offline.
func runPolicy(args []string) int { return policyCommand(args, os.Stdout, os.Stderr) }

func policyCommand(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(errOut, policyUsage)
		return 2
	}
	switch args[0] {
	case "test":
		return policyTest(args[1:], out, errOut)
	case "diff":
		return policyDiff(args[1:], out, errOut)
	case "history":
		return policyHistory(args[1:], out, errOut)
	case "help", "-h", "--help":
		fmt.Fprint(out, policyUsage)
		return 0
	}
	fmt.Fprintf(errOut, "toolgate policy: unknown subcommand %q\n%s", args[0], policyUsage)
	return 2
}

// loadPolicyFiles reads the config and a policy file with the configured model (policyPath ""
// means the configured policy), linted as serve would.
func loadPolicyFiles(configPath, policyPath string, errOut io.Writer) (*config.Config, *authz.Policy, bool) {
	cfg, err := config.Load(configPath)
	if err != nil {
		printProblems(errOut, "invalid configuration", err)
		return nil, nil, false
	}
	if policyPath == "" {
		policyPath = cfg.PolicyPath()
	}
	p, err := authz.LoadPolicy(cfg.ModelPath(), policyPath, gateway.PolicyOptions(cfg))
	if err != nil {
		printProblems(errOut, "invalid policy "+policyPath, err)
		return nil, nil, false
	}
	return cfg, p, true
}

// apiKeyAttributes are each principal's API-key attributes.
func apiKeyAttributes(cfg *config.Config) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, k := range cfg.Auth.APIKeys {
		if len(k.Attributes) == 0 {
			continue
		}
		if out[k.Principal] == nil {
			out[k.Principal] = map[string]string{}
		}
		for n, v := range k.Attributes {
			out[k.Principal][n] = v
		}
	}
	return out
}

func policyTest(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fs.SetOutput(errOut)
	configPath := fs.String("config", "toolgate.yaml", "configuration file (model, policy, principals, servers)")
	policyPath := fs.String("policy", "", "test this policy file instead of the configured one (a candidate)")
	offline := fs.Bool("offline", false, "do not start the upstreams: tools are not checked to exist, arguments not against their schemas")
	verbose := fs.Bool("v", false, "print passing cases too")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(errOut, policyUsage)
		return 2
	}
	cases, err := policytest.Load(fs.Arg(0))
	if err != nil {
		printProblems(errOut, "invalid case file", err)
		return 2
	}
	cfg, policy, ok := loadPolicyFiles(*configPath, *policyPath, errOut)
	if !ok {
		return 2
	}
	env := policytest.Env{
		Policy:     policy,
		Principals: gateway.PolicyOptions(cfg).Principals,
		Attributes: apiKeyAttributes(cfg),
		ToolID:     func(name string) (string, error) { return canonicalTool(cfg, name) },
	}
	if *policyPath != "" {
		// The case file is shared with the configured policy: its policy.csv:37 means line 37 of
		// the candidate under test.
		env.PolicyFile, env.PolicyAliases = *policyPath, []string{cfg.PolicyPath()}
	}
	if cfg.Auth.JWT != nil {
		env.JWT = &policytest.JWT{PrincipalClaim: cfg.JWTPrincipalClaim(), RolesClaim: cfg.Auth.JWT.RolesClaim, AttributeClaims: cfg.Auth.JWT.AttributeClaims}
	}
	fmt.Fprintf(out, "policy: %s (version %s)\n", policyFile(cfg, *policyPath), policy.Version())
	if *offline {
		fmt.Fprintln(out, "catalog: not consulted (--offline): "+notChecked)
	} else {
		cat, closeCatalog, err := startCatalog(cfg)
		if err != nil {
			fmt.Fprintf(out, "catalog: the upstreams could not be started (%v): %s\n", oneLine(err), notChecked)
		} else {
			defer closeCatalog()
			env.Catalog = cat
			fmt.Fprintf(out, "catalog: %d tool(s) from the configured upstreams\n", len(cat.Tools))
			for server, why := range cat.Down {
				fmt.Fprintf(out, "catalog: server %s is unavailable (%s): its tools are not checked\n", server, why)
			}
		}
	}
	results := policytest.Run(cases, env)
	policytest.Print(out, cases, results, *verbose)
	if policytest.Summarize(results).Failed > 0 {
		return 1
	}
	return 0
}

// notChecked says what a policy test without the catalog does not check.
const notChecked = "tool names are mapped through the configured prefixes but not checked to exist, " +
	"and arguments are not checked against the tools' input schemas (conditions on arguments are still evaluated)"

func policyFile(cfg *config.Config, override string) string {
	if override != "" {
		return override
	}
	return cfg.PolicyPath()
}

func oneLine(err error) string { return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ") }

// startCatalog connects to the upstreams as serve would (pins read, never recorded) and returns
// their catalog in policytest's terms.
func startCatalog(cfg *config.Config) (*policytest.Catalog, func(), error) {
	store, err := gateway.OpenPins(cfg, pins.WithoutRecording())
	if err != nil {
		return nil, nil, err
	}
	set, err := upstreams.Start(context.Background(), gateway.UpstreamServers(cfg), slog.New(slog.DiscardHandler), upstreams.WithPins(store))
	if err != nil {
		return nil, nil, err
	}
	c := set.Catalog()
	cat := &policytest.Catalog{Tools: map[string]policytest.Tool{}, Down: c.Down(), Blocked: map[string]string{}}
	for _, ch := range c.Changed() {
		cat.Blocked[ch.ID] = "blocked by pinning: " + ch.Reason()
	}
	for _, q := range c.Quarantined() {
		cat.Blocked[q.Server+"/"+q.Upstream] = "quarantined: " + q.Reason
	}
	for _, t := range c.Tools() {
		pt := policytest.Tool{Name: t.Name}
		switch {
		case t.Override != nil:
			pt.Check = t.Override.Check // conditions see the fixed values, as in a call
		case t.Input != nil:
			input := t.Input
			pt.Check = func(args json.RawMessage) (json.RawMessage, error) { return args, input.ValidateArguments(args) }
		}
		cat.Tools[t.ID] = pt
	}
	return cat, set.Close, nil
}

func policyDiff(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("policy diff", flag.ContinueOnError)
	fs.SetOutput(errOut)
	configPath := fs.String("config", "toolgate.yaml", "configuration file (model, policy in force, principals, audit.file)")
	against := fs.String("against", "", "the candidate policy file (required)")
	trail := fs.String("audit", "", "the audit file (default: audit.file of the config); its rotated files and slots are read too")
	since := fs.String("since", "", "replay records from this time on: RFC 3339, a date (2026-11-30), or a duration ago (24h)")
	until := fs.String("until", "", "replay records before this time (same forms as --since)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	shadow := fs.Bool("shadow", false, "report the disagreements the shadow policy recorded in the trail instead of replaying a candidate")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *shadow && *against != "" {
		fmt.Fprintln(errOut, "toolgate policy diff: --shadow reads what the running shadow policy recorded: it takes no --against")
		return 2
	}
	if (*against == "" && !*shadow) || fs.NArg() != 0 {
		fmt.Fprint(errOut, policyUsage)
		return 2
	}
	now := time.Now()
	var o replay.Options
	var err error
	if o.Since, err = parseWhen(*since, now); err != nil {
		fmt.Fprintln(errOut, "toolgate policy diff: --since:", err)
		return 2
	}
	if o.Until, err = parseWhen(*until, now); err != nil {
		fmt.Fprintln(errOut, "toolgate policy diff: --until:", err)
		return 2
	}
	if *shadow {
		return shadowDiff(*configPath, *trail, replay.ShadowOptions{Since: o.Since, Until: o.Until}, *asJSON, out, errOut)
	}
	cfg, current, ok := loadPolicyFiles(*configPath, "", errOut)
	if !ok {
		return 2
	}
	candidate, err := authz.LoadPolicy(cfg.ModelPath(), *against, gateway.PolicyOptions(cfg))
	if err != nil {
		printProblems(errOut, "invalid candidate policy "+*against, err)
		return 2
	}
	trails, ok := diffTrails(cfg, *trail, errOut)
	if !ok {
		return 2
	}
	o.Current, o.Candidate = current, candidate
	o.Attributes = apiKeyAttributes(cfg)
	o.Configured = gateway.PolicyOptions(cfg).Principals
	rep, err := replay.Run(o, trails)
	if err != nil {
		fmt.Fprintln(errOut, "toolgate policy diff:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(diffJSON{Policy: cfg.PolicyPath(), Candidate: *against, Trails: trails, IncludeArgs: cfg.AuditIncludeArgs(), Report: rep}); err != nil {
			fmt.Fprintln(errOut, "toolgate policy diff:", err)
			return 2
		}
	} else {
		printDiff(out, cfg, *against, trails, rep)
	}
	if rep.Empty() {
		return 0
	}
	return 1
}

// diffTrails are the trails `policy diff` reads: the files of --audit, else of the config's
// audit.file.
func diffTrails(cfg *config.Config, trail string, errOut io.Writer) ([][]string, bool) {
	path := trail
	if path == "" {
		if !cfg.AuditEnabled() {
			fmt.Fprintf(errOut, "toolgate policy diff: %s disables the audit trail; name one with --audit\n", cfg.File)
			return nil, false
		}
		path = cfg.AuditPath()
	}
	trails, err := audit.TrailFiles(path)
	if err == nil && len(trails) == 0 {
		err = fmt.Errorf("no trail at %s", path)
	}
	if err != nil {
		fmt.Fprintln(errOut, "toolgate policy diff:", err)
		return nil, false
	}
	return trails, true
}

// shadowDiff is `policy diff --shadow`: the disagreements of the shadow policy, as the trail recorded
// them (nothing is decided again, so the policies are not loaded; the config names the trail).
func shadowDiff(configPath, trail string, o replay.ShadowOptions, asJSON bool, out, errOut io.Writer) int {
	cfg, err := config.Load(configPath)
	if err != nil {
		printProblems(errOut, "invalid configuration", err)
		return 2
	}
	trails, ok := diffTrails(cfg, trail, errOut)
	if !ok {
		return 2
	}
	rep, err := replay.Shadow(o, trails)
	if err != nil {
		fmt.Fprintln(errOut, "toolgate policy diff:", err)
		return 2
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(shadowJSON{ShadowPolicy: cfg.ShadowPolicyPath(), Trails: trails, ShadowReport: rep}); err != nil {
			fmt.Fprintln(errOut, "toolgate policy diff:", err)
			return 2
		}
	} else {
		printShadow(out, cfg, trails, rep)
	}
	if rep.Empty() {
		return 0
	}
	return 1
}

// shadowJSON is `policy diff --shadow --json`.
type shadowJSON struct {
	ShadowPolicy string     `json:"shadow_policy,omitempty"` // authz.shadow_policy in the config now
	Trails       [][]string `json:"trails"`
	*replay.ShadowReport
}

func printShadow(w io.Writer, cfg *config.Config, trails [][]string, rep *replay.ShadowReport) {
	if p := cfg.ShadowPolicyPath(); p != "" {
		fmt.Fprintf(w, "shadow policy: %s (now; the records name the version that disagreed)\n", p)
	} else {
		fmt.Fprintln(w, "shadow policy: none configured now (authz.shadow_policy); the trail may still hold earlier disagreements")
	}
	for _, files := range trails {
		fmt.Fprintf(w, "trail:         %s (%d file(s))\n", files[len(files)-1], len(files))
	}
	fmt.Fprintln(w, rep.Summary())
	if rep.OutsideWindow > 0 {
		fmt.Fprintf(w, "(%d call(s) outside --since/--until not read)\n", rep.OutsideWindow)
	}
	if rep.Empty() {
		fmt.Fprintln(w, "no recorded call was decided otherwise by the shadow policy")
		return
	}
	fmt.Fprintln(w, "\ncalls the shadow policy decided otherwise (by principal and tool):")
	for _, d := range rep.Disagreements {
		fmt.Fprintf(w, "\n  %s  %s  %s  %d call(s), %s .. %s\n", d.Principal, d.Tool, d.Direction, d.Calls,
			d.First.UTC().Format(time.RFC3339), d.Last.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "    live:   %s\n    shadow: %s", d.Live, d.Shadow)
		if len(d.ShadowVersions) > 0 {
			fmt.Fprintf(w, " (version %s)", strings.Join(d.ShadowVersions, ", "))
		}
		fmt.Fprintf(w, "\n    first record: %s\n", d.Example)
	}
}

// diffJSON is `policy diff --json`.
type diffJSON struct {
	Policy      string     `json:"policy"`
	Candidate   string     `json:"candidate"`
	Trails      [][]string `json:"trails"`
	IncludeArgs bool       `json:"include_args"` // audit.include_args in the config now
	*replay.Report
}

func printDiff(w io.Writer, cfg *config.Config, candidate string, trails [][]string, rep *replay.Report) {
	fmt.Fprintf(w, "policy in force: %s (version %s)\ncandidate:       %s (version %s)\n", cfg.PolicyPath(), rep.CurrentVersion, candidate, rep.CandidateVersion)
	for _, files := range trails {
		fmt.Fprintf(w, "trail:           %s (%d file(s))\n", files[len(files)-1], len(files))
	}
	fmt.Fprintln(w, rep.Summary())
	if rep.OutsideWindow > 0 {
		fmt.Fprintf(w, "(%d call(s) outside --since/--until not replayed)\n", rep.OutsideWindow)
	}
	if rep.Changed == 0 && rep.Unknown == 0 {
		fmt.Fprintln(w, "no recorded call would be decided otherwise")
		return
	}
	if len(rep.Changes) > 0 {
		fmt.Fprintln(w, "\ncalls decided otherwise (by principal and tool):")
	}
	for _, c := range rep.Changes {
		fmt.Fprintf(w, "\n  %s  %s  %d call(s), %s .. %s\n", c.Principal, c.Tool, c.Calls, c.First.UTC().Format(time.RFC3339), c.Last.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "    now:   %s\n    after: %s\n    first record: %s\n", c.Now, c.After, c.Example)
		if c.TokenSubject {
			fmt.Fprintln(w, "    note: no API key names this principal: its token's roles and attributes are not in the trail, so it was replayed with its g lines only")
		}
	}
	if len(rep.Unknowns) > 0 {
		fmt.Fprintln(w, "\nunknown: calls a condition on the arguments decides, whose arguments the trail does not have whole:")
		for _, u := range rep.Unknowns {
			fmt.Fprintf(w, "  %s  %s  %d call(s): %s\n", u.Principal, u.Tool, u.Calls, u.Why)
		}
		if !cfg.AuditIncludeArgs() {
			fmt.Fprintln(w, "(set audit.include_args: true to keep arguments for replay; see docs/policy.md, Testing policy changes)")
		}
	}
}

// parseWhen reads --since and --until: RFC 3339, a date (UTC midnight), or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("expected RFC 3339 (2026-11-30T09:00:00Z), a date (2026-11-30) or a duration ago (24h), got " + s)
}
