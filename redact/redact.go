// Package redact removes secrets from text an upstream sends before that
// text reaches a client, a log or the audit trail: a tool that reads a
// config file, an environment or a database row can hand back a cloud key,
// a token or a private key, and a model that sees it can repeat it anywhere.
// Each secret found is replaced by "[redacted:<pattern>]" and counted per
// pattern (docs/configuration.md, "Redaction").
//
// It is a package of its own rather than part of sanitize: sanitize makes
// text safe to display (escapes, invisible characters) and has no settings;
// redaction has configurable patterns, costs a regexp where a keyword is
// present, and reports what it found.
//
// Cost: every pattern has literal keywords (AKIA, ghp_, eyJ, ://, ...).
// One pass over the text (scan.go) finds which patterns' keywords occur;
// text with none, nearly every result, is returned as is, without a copy,
// for about 2µs per 1 KB and 1.5ms of CPU per 1 MB (bench_test.go). A
// pattern's regexp runs only on windows around its keyword occurrences.
package redact

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Pattern is one kind of secret.
type Pattern struct {
	// Name labels the metric and the replacement: [redacted:<Name>].
	Name string
	// Regexp (RE2 syntax) matches the secret. When it has a group named
	// secret, only that group is replaced (the password of a connection
	// string, not the whole URL).
	Regexp string
	// Keywords are literal strings one of which every match contains; the
	// regexp runs only on text that contains one. None: the regexp's
	// literal prefix, and without one the regexp runs on every text.
	Keywords []string

	// The window around each keyword the regexp runs on (see windows):
	// a match starts at most before bytes ahead of its keyword and ends at
	// most after bytes past the keyword's start (after < 0: anywhere up to
	// the end of the text). Patterns from the config get customBefore and
	// customAfter.
	before, after int
	windowed      bool
	// near, when set, is a cheap check of one keyword occurrence (at is
	// its offset) before the regexp runs on its window.
	near func(s string, at int) bool
}

// The window of a configured pattern: a match within 256 bytes before and
// 4 KiB after one of its keywords (docs/configuration.md, "Redaction").
const (
	customBefore = 256
	customAfter  = 4 << 10
)

// Options configure a Redactor. The zero value applies the default
// patterns and counts nothing.
type Options struct {
	Patterns []Pattern // applied after the defaults
	Disable  []string  // names of default patterns not to apply
	// Count is told of every redaction: the pattern and how many secrets
	// it replaced in one text. nil: not counted.
	Count func(pattern string, n int)
}

// Redactor applies patterns. It is safe for concurrent use; a nil
// *Redactor redacts nothing.
type Redactor struct {
	patterns []compiled
	scan     *scanner
	count    func(string, int)
	pemKey   bool      // private_key is applied: stderr lines track PEM blocks (Lines)
	quiet    *Redactor // the same patterns, counting nothing (Uncounted)
}

type compiled struct {
	name          string
	re            *regexp.Regexp
	keywords      []string
	secret        int // index of the secret group, or 0 for the whole match
	repl          string
	before, after int
	near          func(string, int) bool
}

// New compiles the default patterns (less o.Disable) and o.Patterns.
func New(o Options) (*Redactor, error) {
	r := &Redactor{count: o.Count}
	names := map[string]bool{}
	for _, d := range o.Disable {
		if !slices.ContainsFunc(defaults, func(p Pattern) bool { return p.Name == d }) {
			return nil, fmt.Errorf("redact: %q is not a default pattern (%s)", d, strings.Join(DefaultNames(), ", "))
		}
	}
	for _, p := range append(slices.Clone(defaults), o.Patterns...) {
		if slices.Contains(o.Disable, p.Name) {
			continue
		}
		if names[p.Name] {
			return nil, fmt.Errorf("redact: pattern %q given twice", p.Name)
		}
		names[p.Name] = true
		c, err := compile(p)
		if err != nil {
			return nil, err
		}
		r.patterns = append(r.patterns, c)
		r.pemKey = r.pemKey || p.Name == PrivateKey
	}
	if len(r.patterns) > maxPatterns {
		return nil, fmt.Errorf("redact: %d patterns, at most %d", len(r.patterns), maxPatterns)
	}
	r.scan = newScanner(r.patterns)
	r.quiet = &Redactor{patterns: r.patterns, scan: r.scan, pemKey: r.pemKey}
	return r, nil
}

// Uncounted is r without Options.Count: for a second copy of text already
// redacted and counted (an error's detail, which repeats its message), so
// that one secret is counted once. Report counts what only it found.
func (r *Redactor) Uncounted() *Redactor {
	if r == nil {
		return nil
	}
	return r.quiet
}

// Report tells Options.Count of c.
func (r *Redactor) Report(c Counts) {
	if r == nil || r.count == nil {
		return
	}
	for name, n := range c {
		r.count(name, n)
	}
}

// Check reports what is wrong with p as a configured pattern, or nil.
func Check(p Pattern) error {
	_, err := compile(p)
	return err
}

var nameRe = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

func compile(p Pattern) (compiled, error) {
	if !nameRe.MatchString(p.Name) {
		return compiled{}, fmt.Errorf("redact: a pattern name is 1 to 40 of a-z 0-9 _, got %q", p.Name)
	}
	re, err := regexp.Compile(p.Regexp)
	if err != nil {
		return compiled{}, fmt.Errorf("redact: pattern %s: %v", p.Name, err)
	}
	if re.MatchString("") {
		return compiled{}, fmt.Errorf("redact: pattern %s matches the empty string, so it would match everywhere", p.Name)
	}
	kw := slices.Clone(p.Keywords)
	if slices.Contains(kw, "") {
		return compiled{}, fmt.Errorf("redact: pattern %s has an empty keyword, which every text contains", p.Name)
	}
	if len(kw) == 0 {
		if prefix, _ := re.LiteralPrefix(); prefix != "" {
			kw = []string{prefix}
		}
	}
	c := compiled{name: p.Name, re: re, keywords: kw, repl: "[redacted:" + p.Name + "]", before: p.before, after: p.after, near: p.near}
	if !p.windowed {
		c.before, c.after = customBefore, customAfter
	}
	if i := re.SubexpIndex("secret"); i > 0 {
		c.secret = i
	}
	return c, nil
}

// Counts are secrets replaced, per pattern name; nil when none were.
type Counts map[string]int

// Add adds other's counts to c, making c when it is nil.
func (c *Counts) Add(other Counts) {
	if len(other) == 0 {
		return
	}
	if *c == nil {
		*c = make(Counts, len(other))
	}
	for k, n := range other {
		(*c)[k] += n
	}
}

// Total is the number of secrets replaced.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Clone is a copy of c (nil for none), for a record kept past the call.
func (c Counts) Clone() Counts {
	if len(c) == 0 {
		return nil
	}
	return maps.Clone(c)
}

// String is s with every secret replaced, and what was replaced. s itself
// is returned when nothing was.
func (r *Redactor) String(s string) (string, Counts) {
	out, counts, _ := r.redactString(s)
	return out, counts
}

// redactString is String that also says whether any pattern's keyword
// occurred in s.
func (r *Redactor) redactString(s string) (string, Counts, bool) {
	if r == nil || s == "" {
		return s, nil, false
	}
	found := r.scan.scan(s)
	if found == 0 {
		return s, nil, false
	}
	var counts Counts
	for i := range r.patterns {
		p := &r.patterns[i]
		if found&(1<<i) == 0 {
			continue
		}
		var n int
		if s, n = p.apply(s); n > 0 {
			counts.Add(Counts{p.name: n})
			if r.count != nil {
				r.count(p.name, n)
			}
		}
	}
	return s, counts, true
}

// Text is String without the counts.
func (r *Redactor) Text(s string) string {
	out, _ := r.String(s)
	return out
}

// apply replaces every match of the pattern in s. The regexp (Go's, an
// automaton without backtracking, but still tens of MB/s at best) runs
// only on windows around the keyword occurrences, so a 1 MB result with a
// thousand URLs costs a thousand small searches, not a thousand passes.
func (p *compiled) apply(s string) (string, int) {
	var b strings.Builder
	last, n := 0, 0
	for _, w := range p.windows(s) {
		for _, m := range p.re.FindAllStringSubmatchIndex(s[w[0]:w[1]], -1) {
			start, end := m[2*p.secret], m[2*p.secret+1]
			if start < 0 {
				continue // the secret group did not take part
			}
			start, end = start+w[0], end+w[0]
			if start < last {
				continue // inside a secret already replaced
			}
			if n == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:start])
			b.WriteString(p.repl)
			last = end
			n++
		}
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// windows are the spans of s the regexp runs on, in order and merged
// where they overlap: the whole of s for a pattern without keywords.
func (p *compiled) windows(s string) [][2]int {
	if len(p.keywords) == 0 {
		return [][2]int{{0, len(s)}}
	}
	var ws [][2]int
	for _, k := range p.keywords {
		for off := 0; off < len(s); {
			i := strings.Index(s[off:], k)
			if i < 0 {
				break
			}
			at := off + i
			off = at + len(k)
			if p.near != nil && !p.near(s, at) {
				continue
			}
			end := len(s)
			if p.after >= 0 {
				end = min(len(s), at+p.after)
			}
			ws = append(ws, [2]int{max(0, at-p.before), end})
		}
	}
	slices.SortFunc(ws, func(a, b [2]int) int { return a[0] - b[0] })
	merged := ws[:0]
	for _, w := range ws {
		if k := len(merged) - 1; k >= 0 && w[0] <= merged[k][1] {
			merged[k][1] = max(merged[k][1], w[1])
			continue
		}
		merged = append(merged, w)
	}
	return merged
}
