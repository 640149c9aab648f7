package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Each kind of tampering is found and reported at the line that is wrong,
// with what was expected. The chain cannot see lines cut off the ends:
// those cases verify, and the report shows where the trail starts and
// ends.
func TestVerifyTampering(t *testing.T) {
	edit := func(n int) func([]string) []string {
		return func(ls []string) []string {
			ls[n-1] = strings.Replace(ls[n-1], `"principal":"alice"`, `"principal":"mallory"`, 1)
			return ls
		}
	}
	del := func(n int) func([]string) []string {
		return func(ls []string) []string { return slices.Delete(ls, n-1, n) }
	}
	swap := func(n int) func([]string) []string {
		return func(ls []string) []string { ls[n-1], ls[n] = ls[n], ls[n-1]; return ls }
	}
	tests := []struct {
		name    string
		tamper  func([]string) []string
		line    int    // of the first problem; 0: verifies
		want    string // in its message
		nProbs  int
		lastSeq uint64 // when it verifies
	}{
		{"clean", func(ls []string) []string { return ls }, 0, "", 0, 6},
		{"edited line", edit(3), 3, "edited: this line's SHA-256 is ", 1, 0},
		{"edited first line", edit(1), 1, "edited", 1, 0},
		{"deleted line", del(3), 3, "1 record(s) missing before this line (deleted): seq 4 follows seq 2, expected seq 3 with prev ", 1, 0},
		{"two deleted lines", func(ls []string) []string { return slices.Delete(ls, 1, 3) }, 2, "2 record(s) missing", 1, 0},
		{"swapped pair", swap(3), 3, "lines 3 and 4 are swapped: seq 4 is written before seq 3", 1, 0},
		{"swapped first pair", swap(1), 1, "lines 1 and 2 are swapped: seq 2 is written before seq 1", 1, 0},
		{"swapped last pair", swap(5), 5, "lines 5 and 6 are swapped: seq 6 is written before seq 5", 1, 0},
		{"duplicated line", func(ls []string) []string { return slices.Insert(ls, 3, ls[2]) }, 4, "seq 3, expected 4: out of order", 1, 0},
		{"line moved far", func(ls []string) []string { return append(slices.Delete(ls, 1, 2), ls[1]) }, 2, "1 record(s) missing", 2, 0},
		{"truncated last line", func(ls []string) []string { ls[5] = ls[5][:30]; return ls }, 6, "truncated: the last line has no newline", 1, 0},
		{"line made invalid", func(ls []string) []string { ls[1] = "{" + ls[1]; return ls }, 2, "not an audit record: not a JSON object", 1, 0},
		{"empty line", func(ls []string) []string { return slices.Insert(ls, 2, "\n") }, 3, "not an audit record: empty line", 1, 0},
		{"seq edited", func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `"seq":3,`, `"seq":9,`, 1)
			return ls
		}, 3, "seq 9, expected 3: the seq was edited", 2, 0},
		{"first prev edited", func(ls []string) []string {
			ls[0] = strings.Replace(ls[0], ZeroHash, strings.Repeat("1", 64), 1)
			return ls
		}, 1, "seq 1 must have prev 0000", 2, 0},
		{"chain restarted", func(ls []string) []string { return append(ls, ls[0]) }, 7, "a new chain starts here (seq 1) after seq 6", 1, 0},
		// What the chain cannot see: cutting lines off either end.
		{"first line deleted", del(1), 0, "", 0, 6},
		{"last line deleted", del(6), 0, "", 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTrail(t, 6)
			lines := tt.tamper(readLines(t, path))
			out := strings.Join(lines, "")
			if tt.name != "truncated last line" {
				out = ""
				for _, l := range lines {
					out += strings.TrimSuffix(l, "\n") + "\n"
				}
			}
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(path)
			if tt.line == 0 {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if rep.LastSeq != tt.lastSeq {
					t.Fatalf("report %+v, want last seq %d", rep, tt.lastSeq)
				}
				return
			}
			var te *TamperError
			if !errors.As(err, &te) {
				t.Fatalf("Verify: %v, want a *TamperError", err)
			}
			first := te.Problems[0].String()
			if prefix := fmt.Sprintf("%s:%d: ", path, tt.line); !strings.HasPrefix(first, prefix) || !strings.Contains(first, tt.want) {
				t.Fatalf("first problem\n  %s\nwant %s…%s", first, prefix, tt.want)
			}
			if len(te.Problems) != tt.nProbs {
				t.Errorf("%d problems, want %d:\n%v", len(te.Problems), tt.nProbs, te)
			}
		})
	}
}

// A trail that starts mid-chain verifies and says so; other starts that
// no writer produces are problems.
func TestVerifyMidChainAndErrors(t *testing.T) {
	path := writeTrail(t, 4)
	lines := readLines(t, path)
	writeLines(t, path, lines[2:])
	rep := mustVerify(t, path)
	if !rep.MidChain || rep.FirstSeq != 3 || rep.Records != 2 {
		t.Fatalf("%+v", rep)
	}
	if !strings.Contains(rep.String(), "starts mid-chain at seq 3: the 2 earlier record(s)") {
		t.Errorf("report: %s", rep)
	}
	if _, err := Verify(); err == nil {
		t.Error("Verify() with no files succeeded")
	}
	_, err := Verify(path, path+".missing")
	var te *TamperError
	if err == nil || errors.As(err, &te) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
	empty := path + ".empty"
	writeLines(t, empty, nil)
	if rep, err := Verify(empty); err != nil || rep.Records != 0 || rep.String() != "no records in 1 file(s)" {
		t.Errorf("empty file: %+v %v", rep, err)
	}
	lines[2] = strings.Replace(lines[2], `"prev":"`+parseLine(t, lines[2]).Prev, `"prev":"`+ZeroHash, 1)
	writeLines(t, path, lines[2:])
	if _, err := Verify(path); err == nil || !strings.Contains(err.Error(), ":1: prev 0000") {
		t.Errorf("zero prev on seq 3: %v", err)
	}
}

// Problems are listed in file order and capped.
func TestVerifyManyProblems(t *testing.T) {
	path := writeTrail(t, 3)
	var lines []string
	for range maxProblems + 10 {
		lines = append(lines, "x\n")
	}
	writeLines(t, path, append(readLines(t, path), lines...))
	_, err := Verify(path)
	var te *TamperError
	if !errors.As(err, &te) || len(te.Problems) != maxProblems || !te.More || te.Problems[0].Line != 4 {
		t.Fatalf("%v", err)
	}
	if !strings.HasSuffix(te.Error(), "(more problems after the first 50)") {
		t.Errorf("error does not say there are more")
	}
}
