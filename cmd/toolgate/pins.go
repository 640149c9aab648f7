package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/upstreams"
)

const pinsUsage = `usage:
  toolgate pins diff [--config FILE]                      what changed in every blocked tool
  toolgate pins approve [--config FILE] [--hash H] <tool>  approve the definition the upstream lists now
  toolgate pins approve [--config FILE] --all             approve every blocked tool`

// runPins reviews and approves tools that pinning blocks. It connects to
// the upstreams, as serve does, to see what they list now; the running
// gateway notices the lock file change by itself.
func runPins(args []string) int { return pinsCommand(args, os.Stdout) }

func pinsCommand(args []string, out io.Writer) int {
	if len(args) == 0 || (args[0] != "diff" && args[0] != "approve") {
		fmt.Fprintln(os.Stderr, pinsUsage)
		return 2
	}
	fs := flag.NewFlagSet("pins "+args[0], flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	all := fs.Bool("all", false, "approve every blocked tool")
	hash := fs.String("hash", "", "approve only if the new definition has this hash (as pins diff shows it)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		printProblems(os.Stderr, "invalid configuration", err)
		return 2
	}
	store, set, err := pinsCatalog(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate pins:", err)
		return 2
	}
	defer set.Close()
	changed := set.Catalog().Changed()
	if args[0] == "diff" {
		return pinsDiff(out, changed)
	}
	return pinsApprove(out, store, changed, fs.Args(), *all, *hash)
}

// pinsCatalog opens the lock file read-only and connects to the upstreams
// so their current definitions can be compared with the pins.
func pinsCatalog(cfg *config.Config) (*pins.Store, *upstreams.Set, error) {
	store, err := gateway.OpenPins(cfg, pins.WithoutRecording())
	if err != nil {
		return nil, nil, err
	}
	set, err := upstreams.Start(context.Background(), gateway.UpstreamServers(cfg), slog.New(slog.DiscardHandler), upstreams.WithPins(store))
	if err != nil {
		return nil, nil, err
	}
	writable, err := gateway.OpenPins(cfg)
	if err != nil {
		set.Close()
		return nil, nil, err
	}
	return writable, set, nil
}

func pinsDiff(out io.Writer, changed []upstreams.ChangedTool) int {
	if len(changed) == 0 {
		fmt.Fprintln(out, "no tool is blocked by pinning")
		return 0
	}
	for _, ch := range changed {
		state := "changed since approved " + ch.Pin.ApprovedAt.Format("2006-01-02 15:04") + " (" + ch.Pin.Hash + ")"
		if ch.Pending {
			state = "new, never approved"
		}
		fmt.Fprintf(out, "== %s (%s): %s\n   new hash %s\n%s\n", ch.Name, ch.ID, state, ch.NewHash, ch.Diff())
	}
	return 1
}

func pinsApprove(out io.Writer, store *pins.Store, changed []upstreams.ChangedTool, names []string, all bool, hash string) int {
	if all == (len(names) == 1) || len(names) > 1 {
		fmt.Fprintln(os.Stderr, pinsUsage)
		return 2
	}
	approved := 0
	for _, ch := range changed {
		if !all && names[0] != ch.Name && names[0] != ch.ID {
			continue
		}
		if hash != "" && hash != ch.NewHash {
			fmt.Fprintf(os.Stderr, "toolgate pins: %s now has hash %s, not %s: review the diff again\n", ch.ID, ch.NewHash, hash)
			return 1
		}
		if err := store.Approve(ch.ID, ch.New); err != nil {
			fmt.Fprintln(os.Stderr, "toolgate pins:", err)
			return 1
		}
		fmt.Fprintf(out, "approved %s (%s)\n", ch.ID, ch.NewHash)
		approved++
	}
	if approved == 0 {
		fmt.Fprintf(os.Stderr, "toolgate pins: no blocked tool named %s\n", strings.Join(names, " "))
		return 1
	}
	return 0
}
