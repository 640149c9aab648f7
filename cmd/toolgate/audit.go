package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
)

const auditUsage = `usage:
  toolgate audit verify --config toolgate.yaml   check every trail of the config's audit.file
    That is the file itself and the slots beside it that other gateway processes on the same config
    wrote (toolgate.audit-2.log, -3, …), each its own chain, each with its rotated files.
  toolgate audit verify FILE...   check the hash chain of one audit trail
    Give a rotated trail oldest first: toolgate.audit.log.2 toolgate.audit.log.1 toolgate.audit.log.
    A shell glob (toolgate.audit.log*) is put in that order for you.
exit status: 0 intact, 1 tampered (each problem as file:line), 2 usage or a file that cannot be read
  (with several trails: 1 if any is tampered, else 2 if any cannot be read)`

// auditCommand runs `toolgate audit`. Exit codes tell a script what it
// needs to know: 0 the chain holds, 1 it does not, 2 the check could not
// be made.
func auditCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, auditUsage)
		return 0
	}
	if len(args) < 2 || args[0] != "verify" {
		fmt.Fprintln(stderr, auditUsage)
		return 2
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "configuration file: verify every trail of its audit.file")
	if err := fs.Parse(args[1:]); err != nil || slices.ContainsFunc(fs.Args(), func(a string) bool { return strings.HasPrefix(a, "-") }) ||
		(*configPath == "") == (fs.NArg() == 0) {
		fmt.Fprintln(stderr, auditUsage)
		return 2
	}
	if *configPath != "" {
		return verifyConfigTrails(*configPath, stdout, stderr)
	}
	files := seriesOrder(fs.Args())
	code := verifyTrail(files, stdout, stderr)
	if code == 0 {
		noteOtherTrails(files, stdout)
	}
	return code
}

// verifyTrail checks one trail, files oldest first, and reports it.
func verifyTrail(files []string, stdout, stderr io.Writer) int {
	rep, err := audit.Verify(files...)
	var te *audit.TamperError
	switch {
	case errors.As(err, &te):
		fmt.Fprintf(stderr, "toolgate audit verify: TAMPERED: the chain does not hold in %s\n%s\n", strings.Join(files, ", "), te)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "toolgate audit verify:", err)
		return 2
	}
	fmt.Fprintf(stdout, "intact: %s\nfiles, oldest first: %s\n", rep, strings.Join(files, ", "))
	return 0
}

// verifyConfigTrails checks every trail of the config's audit file: the
// file itself and each slot another gateway process took beside it
// (audit.Trails), one chain each.
func verifyConfigTrails(configPath string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(configPath)
	if err != nil {
		printProblems(stderr, "invalid configuration", err)
		return 2
	}
	if !cfg.AuditEnabled() {
		fmt.Fprintf(stderr, "toolgate audit verify: %s disables the audit trail (audit.disabled): nothing to verify\n", configPath)
		return 2
	}
	trails, err := audit.Trails(cfg.AuditPath())
	if err != nil {
		fmt.Fprintln(stderr, "toolgate audit verify:", err)
		return 2
	}
	if len(trails) == 0 {
		fmt.Fprintf(stderr, "toolgate audit verify: no audit trail at %s (audit.file of %s) nor in a slot beside it\n", cfg.AuditPath(), configPath)
		return 2
	}
	fmt.Fprintf(stdout, "%d trail(s) of %s, each its own chain:\n", len(trails), cfg.AuditPath())
	tampered, unreadable := false, false
	for _, trail := range trails {
		fmt.Fprintf(stdout, "\ntrail %s\n", trail)
		files, err := audit.Files(trail)
		if err != nil {
			fmt.Fprintln(stderr, "toolgate audit verify:", err)
			unreadable = true
			continue
		}
		switch verifyTrail(files, stdout, stderr) {
		case 1:
			tampered = true
			fmt.Fprintf(stdout, "TAMPERED (the problems are on stderr)\n")
		case 2:
			unreadable = true
			fmt.Fprintf(stdout, "cannot be read (see stderr)\n")
		}
	}
	switch {
	case tampered:
		return 1
	case unreadable:
		return 2
	}
	return 0
}

// noteOtherTrails mentions the slots beside a verified trail: files of
// other chains that the command line did not name.
func noteOtherTrails(files []string, stdout io.Writer) {
	newest := files[len(files)-1]
	trails, err := audit.Trails(newest)
	if err != nil || len(trails) < 2 || trails[0] != newest {
		return
	}
	fmt.Fprintf(stdout, "other trails of %s (written by other gateway processes, each its own chain; "+
		"`toolgate audit verify --config` checks them all): %s\n", newest, strings.Join(trails[1:], ", "))
}

// seriesOrder puts the files of one rotated trail (BASE, BASE.1, BASE.2,
// …) oldest first, the highest number first and BASE last, since a shell
// glob sorts them as text (BASE, BASE.1, BASE.10, BASE.2). Any other list
// is kept as given.
func seriesOrder(files []string) []string {
	base := slices.MinFunc(files, func(a, b string) int { return len(a) - len(b) })
	num := make(map[string]int, len(files))
	for _, f := range files {
		n := 0
		if f != base {
			var err error
			rest, ok := strings.CutPrefix(f, base+".")
			if n, err = strconv.Atoi(rest); !ok || err != nil || n < 1 || strconv.Itoa(n) != rest {
				return files
			}
		}
		if _, dup := num[f]; dup {
			return files
		}
		num[f] = n
	}
	if _, ok := num[base]; !ok || len(files) < 2 {
		return files
	}
	out := slices.Clone(files)
	slices.SortFunc(out, func(a, b string) int {
		na, nb := num[a], num[b]
		switch {
		case na == 0:
			return 1
		case nb == 0:
			return -1
		}
		return nb - na
	})
	return out
}
