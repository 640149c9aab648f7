package pins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/canonjson"
)

// diffContext is how many unchanged lines surround each change.
const diffContext = 3

// maxLCSCells bounds the line-diff table; beyond it the differing middle
// of a field is shown as removed then added, which is still correct.
const maxLCSCells = 4 << 20

// Diff is a readable, unified-style diff from old to new, field by field in
// the order name, title, description, inputSchema, outputSchema,
// annotations; fields that did not change are left out. Text fields are
// diffed line by line; schemas and annotations as indented JSON with sorted
// keys, so a reordering shows no difference and a real change shows as
// the lines it touched, in @@ hunks with three lines of context.
//
// Every character that would not print visibly (ANSI escapes, zero-width,
// bidi and tag characters, other controls) is shown as a \uXXXX or
// \UXXXXXXXX escape, so the diff is safe on a terminal and hides nothing: a
// rug pull by invisible text shows. A definition that cannot be
// canonicalised is shown with its raw text.
func Diff(old, new Definition) string {
	var b strings.Builder
	fields := []struct {
		name     string
		old, new []string
	}{
		{"name", textLines(old.Name), textLines(new.Name)},
		{"title", textLines(old.Title), textLines(new.Title)},
		{"description", textLines(old.Description), textLines(new.Description)},
		{"inputSchema", jsonLines(old.InputSchema), jsonLines(new.InputSchema)},
		{"outputSchema", jsonLines(old.OutputSchema), jsonLines(new.OutputSchema)},
		{"annotations", jsonLines(old.Annotations), jsonLines(new.Annotations)},
	}
	for _, f := range fields {
		if equalLines(f.old, f.new) {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", f.name)
		writeHunks(&b, f.old, f.new)
	}
	if b.Len() == 0 {
		return "(no difference)\n"
	}
	return b.String()
}

// none marks a field that is absent, so that absent and empty differ.
const none = "(none)"

func textLines(s string) []string {
	if s == "" {
		return []string{none}
	}
	return strings.Split(visible(s), "\n")
}

func jsonLines(raw json.RawMessage) []string {
	if isNullRaw(raw) {
		return []string{none}
	}
	canon, err := canonjson.Canonical(raw)
	if err != nil {
		return append([]string{"(not canonical JSON: " + err.Error() + ")"}, strings.Split(visible(string(raw)), "\n")...)
	}
	var b bytes.Buffer
	_ = json.Indent(&b, canon, "", "  ") // canon is valid JSON
	return strings.Split(visible(b.String()), "\n")
}

// visible escapes every rune that would not print as itself. Newlines are
// kept (they separate lines); tabs are escaped so that indentation in a
// description cannot pass for diff structure.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == ' ':
			b.WriteRune(r)
		case r == unicode.ReplacementChar || !unicode.IsGraphic(r):
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08X`, r)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// op is one line of an edit script: ' ' kept, '-' removed, '+' added.
type op struct {
	kind byte
	text string
	a, b int // 0-based line numbers in old and new
}

// lineDiff is a minimal line edit script: common prefix and suffix, then an
// LCS table on what is left (bounded; see maxLCSCells).
func lineDiff(a, b []string) []op {
	var ops []op
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, op{' ', a[pre], pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	ops = append(ops, middleDiff(ma, mb, pre)...)
	for i := range suf {
		ia, ib := len(a)-suf+i, len(b)-suf+i
		ops = append(ops, op{' ', a[ia], ia, ib})
	}
	return ops
}

func middleDiff(a, b []string, off int) []op {
	var ops []op
	if len(a)*len(b) > maxLCSCells {
		for i, s := range a {
			ops = append(ops, op{'-', s, off + i, off})
		}
		for j, s := range b {
			ops = append(ops, op{'+', s, off + len(a), off + j})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], off + i, off + j})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			ops = append(ops, op{'-', a[i], off + i, off + j})
			i++
		default:
			ops = append(ops, op{'+', b[j], off + i, off + j})
			j++
		}
	}
	return ops
}

// writeHunks writes the edit script as unified-diff hunks. A field that
// fits in one hunk with nothing left out gets no @@ header.
func writeHunks(b *strings.Builder, a, c []string) {
	ops := lineDiff(a, c)
	var hunks [][2]int // [start, end) in ops
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// a run of kept lines: does the next change come within 2*context?
			k := end
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k < len(ops) && k-end <= 2*diffContext {
				end = k
				continue
			}
			end = min(len(ops), end+diffContext)
			break
		}
		if n := len(hunks); n > 0 && start <= hunks[n-1][1] {
			hunks[n-1][1] = end
		} else {
			hunks = append(hunks, [2]int{start, end})
		}
		i = end
	}
	whole := len(hunks) == 1 && hunks[0][0] == 0 && hunks[0][1] == len(ops)
	for _, h := range hunks {
		if !whole {
			writeHeader(b, ops[h[0]:h[1]])
		}
		for _, o := range ops[h[0]:h[1]] {
			fmt.Fprintf(b, "%c %s\n", o.kind, o.text)
		}
	}
}

// writeHeader writes "@@ -l,n +l,n @@" for a hunk (1-based lines).
func writeHeader(b *strings.Builder, ops []op) {
	var na, nb int
	for _, o := range ops {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	la, lb := ops[0].a+1, ops[0].b+1
	if na == 0 {
		la--
	}
	if nb == 0 {
		lb--
	}
	fmt.Fprintf(b, "@@ -%d,%d +%d,%d @@\n", la, na, lb, nb)
}
