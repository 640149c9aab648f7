package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/audit"
)

const auditUsage = `usage:
  toolgate audit verify FILE...   check the hash chain of an audit trail
    Give a rotated trail oldest first: toolgate.audit.log.2 toolgate.audit.log.1 toolgate.audit.log.
    A shell glob (toolgate.audit.log*) is put in that order for you.
exit status: 0 intact, 1 tampered (each problem as file:line), 2 usage or a file that cannot be read`

// auditCommand runs `toolgate audit`. Exit codes tell a script what it
// needs to know: 0 the chain holds, 1 it does not, 2 the check could not
// be made.
func auditCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, auditUsage)
		return 0
	}
	if len(args) < 2 || args[0] != "verify" || slices.ContainsFunc(args[1:], func(a string) bool { return strings.HasPrefix(a, "-") }) {
		fmt.Fprintln(stderr, auditUsage)
		return 2
	}
	files := seriesOrder(args[1:])
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
