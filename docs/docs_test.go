// Package docs holds toolgate's documentation. This test keeps it navigable: every relative link in the
// README, in docs/ and in bench/README.md leads to a file that exists and, for a #fragment, to a heading
// that exists; the README stays short; and code comments that cite a section of a document here
// ("docs/design.md, Failure semantics") name a heading that exists.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, seen from this package's directory.
const root = ".."

// maxReadme is the README's size limit (issue 15): the pitch, the demo, the stage and error-code tables
// and links; reference material belongs in docs/.
const maxReadme = 15000

// documents are the Markdown files whose links are checked, relative to root.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "bench/README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, _ := filepath.Rel(root, f)
		files = append(files, filepath.ToSlash(rel))
	}
	if len(more) == 0 {
		t.Fatal("no docs/*.md found")
	}
	return files
}

func TestReadmeSize(t *testing.T) {
	info, err := os.Stat(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() >= maxReadme {
		t.Errorf("README.md is %d bytes, want under %d: move reference material into docs/", info.Size(), maxReadme)
	}
}

// linkRE finds inline Markdown links and images: [text](target) or [text](target "title").
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestLinksResolve(t *testing.T) {
	anchors := map[string][]string{} // file (relative to root) -> heading anchors, read once
	anchorsOf := func(file string) []string {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := headingAnchors(readFile(t, file))
		anchors[file] = a
		return a
	}
	checked := 0
	for _, doc := range documents(t) {
		for _, l := range links(readFile(t, doc)) {
			target := l.target
			if isExternal(target) {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			file := doc // a bare #fragment is a heading of the same document
			if path != "" {
				file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
				if strings.HasPrefix(file, "../") || file == ".." {
					t.Errorf("%s:%d: link %q leaves the repository", doc, l.line, target)
					continue
				}
				info, err := os.Stat(filepath.Join(root, file))
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", doc, l.line, target, file)
					continue
				}
				if info.IsDir() {
					if frag != "" {
						t.Errorf("%s:%d: link %q: a #fragment on a directory", doc, l.line, target)
					}
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: link %q: a #fragment on a file that is not Markdown", doc, l.line, target)
				continue
			}
			if !slices.Contains(anchorsOf(file), frag) {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s (has %v)", doc, l.line, target, file, frag, anchorsOf(file))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: is the link pattern broken?")
	}
}

// TestDesignSections checks the headings code comments cite in docs/design.md.
func TestDesignSections(t *testing.T) {
	have := headings(readFile(t, "docs/design.md"))
	for _, want := range []string{
		"The pipeline",
		"The envelope and error codes",
		"Failure semantics",
		"Guards",
		"Shared state",
		"Security defaults",
		"Layout",
		"mcp-go behaviours we rely on or work around",
		"Casbin pitfalls",
	} {
		if !slices.Contains(have, want) {
			t.Errorf("docs/design.md has no section %q (code comments cite it); it has %q", want, have)
		}
	}
}

// citeRE finds a citation of a section in a comment: docs/<name>.md, followed by ", " and the section's
// heading, optionally quoted.
var citeRE = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)(?:, "?([^"\n]*))?`)

// TestCodeCitations checks every Go file's mention of docs/<file>.md: the file exists, and when a
// section follows (docs/design.md, Failure semantics) it begins with a heading of that file.
func TestCodeCitations(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			// A comment wrapped mid-citation continues on the next comment lines.
			text := line
			for j := i + 1; j < len(lines) && j <= i+3 && isComment(lines[j]); j++ {
				text += " " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[j]), "//"))
			}
			for _, m := range citeRE.FindAllStringSubmatchIndex(text, -1) {
				if m[0] >= len(line) {
					break // it starts on a later line: checked there
				}
				doc := "docs/" + text[m[2]:m[3]]
				md, err := os.ReadFile(filepath.Join(root, doc))
				if err != nil {
					t.Errorf("%s:%d: cites %s, which does not exist", rel, i+1, doc)
					continue
				}
				if m[4] < 0 {
					continue
				}
				cited := text[m[4]:m[5]]
				found := false
				for _, h := range headings(string(md)) {
					if strings.HasPrefix(cited, h) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s:%d: cites %s, %q: no heading of %s starts the cited text", rel, i+1, doc, cited, doc)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isComment(line string) bool { return strings.HasPrefix(strings.TrimSpace(line), "//") }

func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

type link struct {
	target string
	line   int
}

// links returns the inline links of a Markdown text outside fenced code blocks and code spans.
func links(md string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// stripCodeSpans blanks `code spans`, where brackets are not links.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isExternal(target string) bool {
	if i := strings.Index(target, ":"); i > 0 {
		scheme := target[:i]
		return !strings.ContainsAny(scheme, "/#.") // http:, https:, mailto:
	}
	return false
}

// headings returns the text of every ATX heading (# to ######) outside fenced code blocks.
func headings(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level > 6 || len(line) == level || line[level] != ' ' {
			continue
		}
		out = append(out, strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[level:]), "#")))
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a document's headings: lower case, punctuation other
// than '-' and '_' removed, spaces turned into '-', and a repeated anchor suffixed -1, -2, ...
func headingAnchors(md string) []string {
	seen := map[string]int{}
	var out []string
	for _, h := range headings(md) {
		a := slug(h)
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
