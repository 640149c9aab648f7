package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
)

// auditTrail writes n call records to a trail rotating every few records
// and returns its files, oldest first.
func auditTrail(t *testing.T, n int) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.audit.log")
	l, err := audit.Open(audit.Options{Path: path, Fsync: audit.FsyncNever, MaxBytes: 1000, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Append(audit.Record{Kind: audit.KindCall, Principal: "alice", Tool: "orders/get_order",
			Decision: audit.DecisionAllowed, Args: []byte(fmt.Sprintf(`{"order_id":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := []string{path}
	for i := 1; ; i++ {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, i)); err != nil {
			return files
		}
		files = append([]string{fmt.Sprintf("%s.%d", path, i)}, files...)
	}
}

func runAudit(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = auditCommand(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditVerify(t *testing.T) {
	files := auditTrail(t, 12)
	if len(files) < 3 {
		t.Fatalf("only %d files", len(files))
	}
	newest := files[len(files)-1]
	glob := slices.Clone(files)
	slices.Sort(glob) // what toolgate.audit.log* expands to
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"whole series", append([]string{"verify"}, files...), 0, "intact: 12 record(s), seq 1..12", ""},
		{"shell glob order", append([]string{"verify"}, glob...), 0, "files, oldest first: " + strings.Join(files, ", "), ""},
		{"newest file alone", []string{"verify", newest}, 0, "starts mid-chain", ""},
		{"wrong order", []string{"verify", newest, files[0]}, 1, "", "TAMPERED"},
		{"no files", []string{"verify"}, 2, "", "usage:"},
		{"no subcommand", nil, 2, "", "usage:"},
		{"unknown subcommand", []string{"check", newest}, 2, "", "usage:"},
		{"a flag", []string{"verify", "--json", newest}, 2, "", "usage:"},
		{"help", []string{"help"}, 0, "toolgate audit verify FILE...", ""},
		{"missing file", []string{"verify", newest + ".nope"}, 2, "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runAudit(tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errOut, tt.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tt.code, tt.out, tt.err)
			}
		})
	}
}

// A tampered trail exits 1 and names the file and line of each problem.
func TestAuditVerifyTampered(t *testing.T) {
	files := auditTrail(t, 3)
	path := files[len(files)-1]
	if len(files) != 1 {
		t.Fatalf("files %v: want one", files)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[0], lines[1] = lines[1], lines[0]
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAudit("verify", path)
	if want := path + ":1: lines 1 and 2 are swapped: seq 2 is written before seq 1"; code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
}

func TestAuditSeriesOrder(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"a.log", "a.log.1", "a.log.10", "a.log.2"}, []string{"a.log.10", "a.log.2", "a.log.1", "a.log"}},
		{[]string{"a.log.1", "a.log"}, []string{"a.log.1", "a.log"}},
		{[]string{"a.log"}, []string{"a.log"}},
		{[]string{"a.log.2", "a.log.1"}, []string{"a.log.2", "a.log.1"}},               // no base: as given
		{[]string{"a.log", "a.log.x"}, []string{"a.log", "a.log.x"}},                   // not a rotation suffix
		{[]string{"a.log", "a.log.01"}, []string{"a.log", "a.log.01"}},                 // not as toolgate names them
		{[]string{"a.log", "b.log.1"}, []string{"a.log", "b.log.1"}},                   // two trails
		{[]string{"a.log", "a.log.1", "a.log"}, []string{"a.log", "a.log.1", "a.log"}}, // a duplicate
	}
	for _, tt := range tests {
		if got := seriesOrder(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("seriesOrder(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// verify --config checks every trail of the config's audit file, each its
// own chain: the file and the slots other processes wrote beside it.
// A tampered slot fails the whole check (exit 1) and is named.
func TestAuditVerifyConfigTrails(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	trail := filepath.Join(filepath.Dir(cfg), "toolgate.audit.log")
	var logs []*audit.Log
	for range 3 { // three processes on one config: the file and slots 2 and 3
		l, err := audit.Open(audit.Options{Path: trail, Fsync: audit.FsyncNever, MaxBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	for i := range 12 {
		if err := logs[i%3].Append(audit.Record{Kind: audit.KindCall, Principal: "alice", Tool: "orders/get_order",
			Decision: audit.DecisionAllowed, Args: []byte(fmt.Sprintf(`{"order_id":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runAudit("verify", "--config", cfg)
	if code != 0 || strings.Count(out, "intact: 4 record(s), seq 1..4, in 2 file(s)") != 3 || !strings.Contains(out, "3 trail(s) of "+trail) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, n := range []int{1, 2, 3} {
		if !strings.Contains(out, "trail "+audit.SlotPath(trail, n)+"\n") {
			t.Errorf("trail %s not reported:\n%s", audit.SlotPath(trail, n), out)
		}
	}
	// The main trail named alone: intact, and the slots are pointed out.
	if code, out, _ := runAudit("verify", trail); code != 0 || !strings.Contains(out, "other trails of "+trail) ||
		!strings.Contains(out, audit.SlotPath(trail, 3)) {
		t.Errorf("verify FILE: exit %d, stdout %q", code, out)
	}

	slot := audit.SlotPath(trail, 2) + ".1" // slots rotate like the file itself
	lines := strings.SplitAfter(mustRead(t, slot), "\n")
	lines[0], lines[1] = lines[1], lines[0]
	write(t, slot, strings.Join(lines, ""))
	code, out, errOut = runAudit("verify", "--config", cfg)
	if code != 1 || strings.Count(out, "intact: ") != 2 || !strings.Contains(errOut, slot+":1: lines 1 and 2 are swapped") {
		t.Fatalf("a tampered slot: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"config and files", []string{"verify", "--config", cfg, trail}, "usage:"},
		{"missing config", []string{"verify", "--config", cfg + ".nope"}, "invalid configuration"},
		{"no trail yet", []string{"verify", "--config", writeConfig(t, stdioUpstream(t, "hostile", ""))}, "no audit trail at"},
	} {
		if code, _, errOut := runAudit(tc.args...); code != 2 || !strings.Contains(errOut, tc.err) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, code, errOut, tc.err)
		}
	}
}
