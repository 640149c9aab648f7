package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
)

const policyHistoryUsage = `usage:
  toolgate policy history [--config toolgate.yaml | --audit TRAIL] [-n N]
      list the policy reloads in the audit trail, newest first: when, the version before and after,
      the lines added and removed, and the principal/tool pairs that gained or lost access.
      --config reads every trail of its audit.file (default toolgate.yaml); --audit one trail (with
      its rotated files); -n the newest N only (0: all).
      exit 0 listed (none is fine), 2 usage or a trail that cannot be read
`

// policyHistory is `toolgate policy history`: the reload reports of the audit trail
// (gateway.reloadRecord), newest first.
func policyHistory(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policy history", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "configuration file: read every trail of its audit.file")
	trail := fs.String("audit", "", "an audit trail file: read it and its rotated files")
	limit := fs.Int("n", 0, "list the newest N reloads only")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || (*configPath != "" && *trail != "") || *limit < 0 {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, policyHistoryUsage)
			return 0
		}
		fmt.Fprint(stderr, policyHistoryUsage)
		return 2
	}
	files, err := historyFiles(*configPath, *trail, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "toolgate policy history:", err)
		return 2
	}
	if files == nil {
		return 2 // historyFiles said why
	}
	var reloads []reloadEntry
	for _, f := range files {
		if err := readReloads(f, &reloads); err != nil {
			fmt.Fprintln(stderr, "toolgate policy history:", err)
			return 2
		}
	}
	slices.SortStableFunc(reloads, func(a, b reloadEntry) int { return b.Time.Compare(a.Time) })
	if *limit > 0 && len(reloads) > *limit {
		reloads = reloads[:*limit]
	}
	if len(reloads) == 0 {
		fmt.Fprintln(stdout, "no policy reloads in the audit trail")
		return 0
	}
	for i, r := range reloads {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		r.print(stdout)
	}
	return 0
}

// historyFiles are the files to read, each trail's oldest first: those of the --audit trail, or of
// every trail of the config's audit.file. nil with no error: the reason is on stderr.
func historyFiles(configPath, trail string, stderr io.Writer) ([]string, error) {
	if trail != "" {
		files, err := audit.Files(trail)
		if err == nil && len(files) == 0 {
			fmt.Fprintf(stderr, "toolgate policy history: no audit trail at %s\n", trail)
		}
		return files, err
	}
	if configPath == "" {
		configPath = "toolgate.yaml"
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		printProblems(stderr, "invalid configuration", err)
		return nil, nil
	}
	if !cfg.AuditEnabled() {
		fmt.Fprintf(stderr, "toolgate policy history: %s disables the audit trail (audit.disabled): no reloads are recorded\n", configPath)
		return nil, nil
	}
	trails, err := audit.Trails(cfg.AuditPath())
	if err != nil {
		return nil, err
	}
	if len(trails) == 0 {
		fmt.Fprintf(stderr, "toolgate policy history: no audit trail at %s (audit.file of %s)\n", cfg.AuditPath(), configPath)
		return nil, nil
	}
	var files []string
	for _, t := range trails {
		fs, err := audit.Files(t)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	return files, nil
}

// reloadEntry is one policy_reload record, as the history shows it.
type reloadEntry struct {
	Time          time.Time
	Decision      audit.Decision
	Reason        string
	PolicyVersion string // in force after the attempt
	Details       struct {
		Previous  string        `json:"previous_version"`
		Candidate string        `json:"candidate_version"`
		Added     []string      `json:"lines_added"`
		Removed   []string      `json:"lines_removed"`
		Gained    []accessEntry `json:"access_gained"`
		Lost      []accessEntry `json:"access_lost"`
		Truncated bool          `json:"access_truncated"`
	}
	reported bool // the record has the reload report (written since issue 20)
}

type accessEntry struct {
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Before    string `json:"before"`
	After     string `json:"after"`
}

var reloadKind = []byte(`"kind":"` + string(audit.KindPolicyReload) + `"`)

// readReloads appends the policy_reload records of one trail file to out. Other lines are only
// looked at, not decoded.
func readReloads(path string, out *[]reloadEntry) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && bytes.Contains(line, reloadKind) {
			var rec struct {
				audit.Record
				Details json.RawMessage `json:"details"`
			}
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				return fmt.Errorf("%s:%d: not an audit record: %v", path, n, jerr)
			}
			if rec.Kind == audit.KindPolicyReload {
				e := reloadEntry{Time: rec.Time, Decision: rec.Decision, Reason: rec.Reason, PolicyVersion: rec.PolicyVersion}
				if len(rec.Details) > 0 {
					_ = json.Unmarshal(rec.Details, &e.Details) // a detail of another shape is left out
					e.reported = e.Details.Candidate != ""
				}
				*out = append(*out, e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
}

func (r reloadEntry) print(w io.Writer) {
	when := r.Time.UTC().Format(time.RFC3339)
	if !r.reported {
		// A load that failed (no candidate), byte-identical files, or a record older than reload reports.
		what := "policy " + r.PolicyVersion + " in force"
		if r.Decision == audit.DecisionRejected {
			what += "; the files did not load: " + firstLine(r.Reason)
		}
		fmt.Fprintf(w, "%s  %-8s  %s\n", when, r.Decision, what)
		return
	}
	d := r.Details
	fmt.Fprintf(w, "%s  %-8s  %s → %s  +%d/−%d lines  gained %d, lost %d pairs\n", when, r.Decision,
		d.Previous, d.Candidate, len(d.Added), len(d.Removed), len(d.Gained), len(d.Lost))
	if r.Decision == audit.DecisionRejected {
		fmt.Fprintf(w, "    refused, %s stays in force: %s\n", r.PolicyVersion, firstLine(r.Reason))
	}
	for _, l := range d.Removed {
		fmt.Fprintf(w, "    - %s\n", l)
	}
	for _, l := range d.Added {
		fmt.Fprintf(w, "    + %s\n", l)
	}
	for _, a := range d.Gained {
		fmt.Fprintf(w, "    gained: %s %s (%s → %s)\n", a.Principal, a.Tool, a.Before, a.After)
	}
	for _, a := range d.Lost {
		fmt.Fprintf(w, "    lost:   %s %s (%s → %s)\n", a.Principal, a.Tool, a.Before, a.After)
	}
	if d.Truncated {
		fmt.Fprintln(w, "    (too many principal/tool pairs to compare: access changes not computed)")
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
