package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/config"
)

const approvalsUsage = `usage:
  toolgate approvals list [--all]                 calls waiting for an approval (--all: every state)
  toolgate approvals approve ID                   let that exact call run once
  toolgate approvals deny ID [--reason TEXT]      refuse it; the agent sees the reason
flags:
  --url URL       the running gateway's admin API (default: http://<admin.listen> of --config)
  --config FILE   the gateway's configuration, read for admin.listen when --url is not given
                  (default toolgate.yaml; without that file, http://127.0.0.1:8081)
  --key KEY       the admin key (default $TOOLGATE_ADMIN_KEY; prefer the variable: flags show in ps)
  --by NAME       recorded as the approver (default $USER)`

// runApprovals lists, approves and denies calls that policy holds for a human approval, through the
// running gateway's admin API.
func runApprovals(args []string) int { return approvalsCommand(args, os.Stdout, os.Stderr, time.Now) }

func approvalsCommand(args []string, out, errOut io.Writer, now func() time.Time) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "approve" && args[0] != "deny") {
		fmt.Fprintln(errOut, approvalsUsage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("approvals "+cmd, flag.ContinueOnError)
	fs.SetOutput(errOut)
	url := fs.String("url", "", "the gateway's admin API (default: http://<admin.listen> of --config)")
	configPath := fs.String("config", "toolgate.yaml", "the gateway's configuration, for admin.listen")
	key := fs.String("key", os.Getenv("TOOLGATE_ADMIN_KEY"), "the admin key (default $TOOLGATE_ADMIN_KEY)")
	by := fs.String("by", os.Getenv("USER"), "who is deciding")
	all := fs.Bool("all", false, "list: every state, not only pending")
	reason := fs.String("reason", "", "deny: why, shown to the agent")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return 2
	}
	wantPos := 1
	if cmd == "list" {
		wantPos = 0
	}
	if len(pos) != wantPos {
		fmt.Fprintln(errOut, approvalsUsage)
		return 2
	}
	if *key == "" {
		fmt.Fprintln(errOut, "toolgate approvals: no admin key: set TOOLGATE_ADMIN_KEY (or --key)")
		return 2
	}
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	base, err := adminURL(*url, *configPath, configSet)
	var probs *config.Problems
	switch {
	case errors.As(err, &probs):
		printProblems(errOut, "cannot read admin.listen from "+*configPath+" (or name the admin API with --url)", err)
		return 2
	case err != nil:
		fmt.Fprintln(errOut, "toolgate approvals:", err)
		return 2
	}
	c := &approvals.Client{URL: base, Key: *key}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var req approvals.Request
	switch cmd {
	case "list":
		var states []approvals.State
		if !*all {
			states = []approvals.State{approvals.StatePending}
		}
		list, err := c.List(ctx, states...)
		if err != nil {
			return approvalsFail(errOut, cmd, base, err)
		}
		printApprovals(out, list, *all, now())
		return 0
	case "approve":
		req, err = c.Approve(ctx, pos[0], *by)
	case "deny":
		req, err = c.Deny(ctx, pos[0], *by, *reason)
	}
	if err != nil {
		return approvalsFail(errOut, cmd, base, err)
	}
	fmt.Fprintf(out, "%s %s: %s calling %s %s\n", req.ID, req.State, terminalSafe(req.Principal), terminalSafe(req.Tool),
		terminalSafe(clipText(string(req.Args), 200)))
	if req.State == approvals.StateApproved {
		fmt.Fprintf(out, "the identical call runs once if repeated within %s\n", approvalsDur(req.ExpiresAt.Sub(now())))
	}
	return 0
}

// parseInterleaved lets flags come before or after the positional arguments (approve ID --url X).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// adminURL is the admin API to talk to: --url when given, else http://<admin.listen> of the config.
// Without --config and without a toolgate.yaml here, it is the default admin address; a config that
// is there but cannot be read is an error, never a silent fallback to another gateway's address.
func adminURL(flagURL, configPath string, configSet bool) (string, error) {
	if flagURL != "" {
		return flagURL, nil
	}
	addr := config.DefaultAdminAddr
	if _, statErr := os.Stat(configPath); configSet || !errors.Is(statErr, os.ErrNotExist) {
		cfg, err := config.Load(configPath)
		if err != nil {
			return "", err
		}
		addr = cfg.AdminAddr()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("admin.listen %q: %v (name the admin API with --url)", addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("admin.listen %q of %s picks a free port at each start, so it does not say where the gateway listens; name the admin API with --url", addr, configPath)
	}
	// A wildcard listener is reached on loopback from the same host.
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// approvalsFail prints why a request to the admin API at base failed and chooses the exit code: the
// key refused (401, 403) is exitKeyRefused, a gateway that cannot be reached exitUnreachable (as
// for toolgate call), anything else 1.
func approvalsFail(errOut io.Writer, cmd, base string, err error) int {
	var apiErr *approvals.APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden) {
		return keyRefused(errOut, "toolgate approvals", base, apiErr.Status, false, "TOOLGATE_ADMIN_KEY or --key against admin.key_sha256")
	}
	if unreachable(err) {
		cannotReach(errOut, "toolgate approvals", base, err)
		return exitUnreachable
	}
	if errors.As(err, &apiErr) && apiErr.Status == 503 {
		// Replicas keep approvals in their shared store (state.redis); any replica's admin API will do
		// once it is back.
		if cmd == "list" {
			fmt.Fprintln(errOut, "toolgate approvals: the gateway cannot reach its shared state store right now, so it cannot tell which calls are waiting for an approval; try again")
			return 1
		}
		fmt.Fprintln(errOut, "toolgate approvals: the gateway cannot reach its shared state store right now; nothing was decided, try again")
		return 1
	}
	fmt.Fprintln(errOut, "toolgate approvals:", err)
	return 1
}

// printApprovals writes a table: id, age, principal, tool, args (clipped), rule, expires in (and state
// with --all). Everything from the agent is made terminal-safe: arguments could carry escape sequences.
func printApprovals(out io.Writer, list []approvals.Request, withState bool, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(out, "no approval requests")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "ID\tAGE\tPRINCIPAL\tTOOL\tARGS\tRULE\tEXPIRES IN"
	if withState {
		head += "\tSTATE"
	}
	fmt.Fprintln(tw, head)
	for _, r := range list {
		expires := "-"
		if r.State == approvals.StatePending || r.State == approvals.StateApproved || r.State == approvals.StateDenied {
			expires = approvalsDur(r.ExpiresAt.Sub(now))
		}
		line := strings.Join([]string{
			r.ID, approvalsDur(now.Sub(r.CreatedAt)), terminalSafe(r.Principal), terminalSafe(r.Tool),
			terminalSafe(clipText(string(r.Args), 60)), terminalSafe(r.Rule), expires,
		}, "\t")
		if withState {
			line += "\t" + string(r.State)
			if r.Reason != "" {
				line += ": " + terminalSafe(clipText(r.Reason, 60))
			}
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// approvalsDur rounds a duration for a table: 45s, 12m, 3h5m.
func approvalsDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	if d = d.Round(time.Minute); d < time.Hour {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// terminalSafe replaces control and format characters (escape sequences, bidi overrides, zero-width
// characters, tabs that would break the table) with "?".
func terminalSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}
