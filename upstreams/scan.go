package upstreams

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/sanitize"
)

// The description scan (config key description_scan) looks at everything
// an upstream tells the model about a tool: its title, its description, and
// every "title" and "description" string inside its input and output
// schemas. It looks for two things.
//
// Hidden characters, which a model reads and a human reviewing the tool in
// a terminal or UI does not see:
//
//	ansi        ESC (0x1B) and CSI (U+009B): terminal escape sequences
//	control     other C0/C1 control characters (tab, LF and CR are fine)
//	zero_width  U+200B-U+200F, U+2060, U+FEFF
//	bidi        U+202A-U+202E, U+2066-U+2069 (text that reads differently than it shows)
//	tag         U+E0000-U+E007F (invisible ASCII: the finding shows the hidden text)
//
// (zero_width, bidi and tag are sanitize.ZeroWidth, sanitize.Bidi and
// sanitize.Tag: sanitize.Text removes the same characters from results.)
//
// Instructions aimed at the model rather than describing the tool, found by
// the heuristics in instructionRules (case-insensitive, on the text with
// hidden characters removed and whitespace collapsed, and on text hidden in
// tag characters), plus:
//
//	other_tool  the name of a tool of another configured server: its
//	            client-facing name or its upstream name, when that name looks
//	            like an identifier (has _, -, a digit or an inner capital, and
//	            at least 4 characters; "search" alone is a word, not a
//	            reference). Names of the tool's own server are not flagged:
//	            "call get_order first" is normal between sibling tools.
//
// What happens then depends on the mode (per server, default strip):
//
//	off         nothing is scanned; titles and descriptions are sanitised as always
//	strip       hidden characters are removed from the title, the description
//	            and the schema strings the client is sent (the schemas are
//	            compiled from the upstream's bytes; only what is advertised
//	            changes); instruction-like text cannot be removed reliably, so
//	            it is kept and flagged (logged, and listed by toolgate check)
//	quarantine  a tool with any finding is quarantined (not listed, not callable)
//
// The heuristics are deliberately narrow phrases: they flag what tool
// poisoning write-ups show ("<IMPORTANT>", "before using any other tool",
// "do not tell the user", "read ~/.ssh/id_rsa and pass it as ...") and
// cannot prove a description benign. Pinning (package pins) is what stops a
// reviewed description from changing later.

// The kinds of finding.
const (
	FindingANSI        = "ansi"
	FindingControl     = "control"
	FindingZeroWidth   = "zero_width"
	FindingBidi        = "bidi"
	FindingTag         = "tag"
	FindingInstruction = "instruction"
	FindingOtherTool   = "other_tool"
)

// The actions taken on a finding.
const (
	ActionStripped    = "stripped"    // hidden characters removed (strip)
	ActionFlagged     = "flagged"     // reported, text kept (strip, instruction-like text)
	ActionQuarantined = "quarantined" // the tool is quarantined (quarantine)
)

// Finding is one thing the description scan found in one place of a tool.
type Finding struct {
	Server, Upstream string
	Where            string // "title", "description", or "inputSchema /properties/id/description"
	Kind             string // one of the Finding* constants
	Detail           string // sanitised and bounded; safe to print
	Action           string // one of the Action* constants
}

// ID is the tool's canonical <server>/<tool>.
func (f Finding) ID() string { return f.Server + "/" + f.Upstream }

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s: %s (%s)", f.ID(), f.Where, f.Kind, f.Detail, f.Action)
}

// instructionRule is one heuristic for text aimed at the model.
type instructionRule struct {
	name string
	re   *regexp.Regexp
}

// instructionRules are the phrase heuristics. [^.\n] bounds keep a match
// within one sentence.
var instructionRules = []instructionRule{
	{"overrides other instructions", regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\b[^.\n]{0,30}\b(previous|prior|above|earlier|other|all|any|system|your)\b[^.\n]{0,20}\b(instructions?|prompts?|rules|directions|guidelines)\b`)},
	{"demands to run before other tools", regexp.MustCompile(`(?i)\b(before|prior to)\s+(using|calling|invoking|running|executing)\s+(any|every|each|other|another|the other|all)\b[^.\n]{0,20}\btools?\b|\b(always|must)\b[^.\n]{0,30}\b(call|use|run|invoke)\s+this\s+tool\s+(first|before)\b`)},
	{"asks to keep something from the user", regexp.MustCompile(`(?i)\b(do not|don't|dont|never|must not)\s+(tell|inform|notify|mention|reveal|show|alert|let)\b[^.\n]{0,30}\buser\b|\bwithout\s+(telling|informing|notifying|alerting|asking)\s+the\s+user\b|\b(hide|conceal)\b[^.\n]{0,30}\bfrom\s+the\s+user\b|\bthe\s+user\s+(must|should)\s+not\s+(know|see|be\s+told)\b`)},
	{"pseudo-tag aimed at the model", regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|secret|hidden|critical)\s*>`)},
	{"redirects from another tool", regexp.MustCompile("(?i)\\b(instead of|rather than|in place of)\\s+(using\\s+|calling\\s+|invoking\\s+)?[`'\"]?([A-Za-z0-9]+[_-][A-Za-z0-9_-]+|(the|any|an?)?\\s*(other|another|built-?in|default)\\s+tools?\\b)")},
	{"mentions secret files", regexp.MustCompile("(?i)~/\\.ssh\\b|\\.ssh/|\\bid_(rsa|dsa|ecdsa|ed25519)\\b|\\.aws/credentials|\\.gnupg\\b|\\.netrc\\b|\\.npmrc\\b|\\.pypirc\\b|\\.kube/config|\\.docker/config\\.json|/etc/(passwd|shadow)\\b|\\bmcp\\.json\\b|claude_desktop_config\\.json|(^|[\\s'\"`/~])\\.env\\b")},
	{"asks to send data elsewhere", regexp.MustCompile(`(?i)\b(send|post|upload|forward|transmit|exfiltrate|leak|copy)\b[^.\n]{0,60}\bto\s+(https?://|[\w.+-]+@[\w-]+\.[\w.-]+|(an?\s+|the\s+)?(external|remote|third[- ]party|following)\b)|\b(bcc|cc)\b[^.\n]{0,30}[\w.+-]+@[\w-]+\.\w+|\b(pass|include|put|embed|append|add)\b[^.\n]{0,40}\b(contents?|keys?|tokens?|credentials|secrets?|passwords?|conversation|chat history)\b[^.\n]{0,40}\b(as|in|into)\s+(the\s+)?\S*\s*(parameter|argument|field|sidenote|note)\b`)},
}

// hiddenClass is the finding kind of a rune that does not show, or "".
func hiddenClass(r rune) string {
	switch {
	case r == 0x1b || r == 0x9b:
		return FindingANSI
	case r == '\t' || r == '\n' || r == '\r':
		return ""
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
		return FindingControl
	case sanitize.ZeroWidth(r):
		return FindingZeroWidth
	case sanitize.Bidi(r):
		return FindingBidi
	case sanitize.Tag(r):
		return FindingTag
	}
	return ""
}

// stripHidden removes every hidden character: sanitize.Text (ANSI
// sequences, controls, bidi, zero-width and tag characters, invalid UTF-8,
// CRLF) plus the zero-width joiners Text keeps between emoji: a tool's
// title and description need no emoji sequences.
func stripHidden(s string) string {
	s = sanitize.Text(s)
	return strings.Map(func(r rune) rune {
		if hiddenClass(r) != "" {
			return -1
		}
		return r
	}, s)
}

// hit is one finding before it is tied to a tool and an action.
type hit struct{ kind, detail string }

// scanText finds hidden characters and instruction-like text in s. others
// is the set of names of other servers' tools (see FindingOtherTool).
func scanText(s string, others map[string]bool) []hit {
	var hits []hit
	type classHits struct {
		count int
		first rune
		at    int
	}
	classes := map[string]*classHits{}
	var order []string
	var tagText strings.Builder
	for i, r := range s {
		if r == utf8.RuneError {
			continue
		}
		k := hiddenClass(r)
		if k == "" {
			continue
		}
		if classes[k] == nil {
			classes[k] = &classHits{first: r, at: i}
			order = append(order, k)
		}
		classes[k].count++
		if k == FindingTag && r >= 0xe0020 && r <= 0xe007e {
			tagText.WriteRune(r - 0xe0000)
		}
	}
	for _, k := range order {
		c := classes[k]
		detail := fmt.Sprintf("%d %s character%s (first %U at byte %d)", c.count, strings.ReplaceAll(k, "_", "-"), plural(c.count), c.first, c.at)
		if k == FindingTag && tagText.Len() > 0 {
			detail += fmt.Sprintf("; hidden text %q", sanitize.Clip(sanitize.Text(tagText.String()), 120))
		}
		hits = append(hits, hit{k, detail})
	}
	hits = append(hits, instructionHits(normalise(s), "", others)...)
	if tagText.Len() > 0 {
		hits = append(hits, instructionHits(normalise(tagText.String()), "in the hidden tag text: ", others)...)
	}
	return hits
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

var spaces = regexp.MustCompile(`\s+`)

// normalise is the text the heuristics read: hidden characters removed (so
// "ig\u200bnore" is "ignore"), whitespace collapsed.
func normalise(s string) string {
	return strings.TrimSpace(spaces.ReplaceAllString(stripHidden(s), " "))
}

// identToken is a run of characters a tool name can have.
var identToken = regexp.MustCompile(`[A-Za-z0-9_-]+`)

func instructionHits(text, prefix string, others map[string]bool) []hit {
	var hits []hit
	for _, rule := range instructionRules {
		if loc := rule.re.FindStringIndex(text); loc != nil {
			hits = append(hits, hit{FindingInstruction, fmt.Sprintf("%s%s: %q", prefix, rule.name, excerpt(text, loc))})
		}
	}
	seen := map[string]bool{}
	for _, tok := range identToken.FindAllString(text, -1) {
		if others[tok] && !seen[tok] {
			seen[tok] = true
			hits = append(hits, hit{FindingOtherTool, fmt.Sprintf("%snames %q, a tool of another server", prefix, tok)})
		}
	}
	return hits
}

// excerpt is the matched text, bounded, for a finding's detail.
func excerpt(text string, loc []int) string {
	return sanitize.Clip(text[loc[0]:loc[1]], 80)
}

// looksLikeIdentifier: a name a description would only contain to refer to
// that tool (see FindingOtherTool).
func looksLikeIdentifier(name string) bool {
	if len(name) < 4 {
		return false
	}
	for i, r := range name {
		if r == '_' || r == '-' || unicode.IsDigit(r) || i > 0 && unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

// schemaString is one "title" or "description" string in a schema.
type schemaString struct {
	ptr        string // JSON pointer of the string
	start, end int    // the string literal's bytes in the schema, quotes included
	value      string
}

// schemaStrings finds every string value of a "title" or "description" key
// anywhere in raw (which has been checked as JSON already).
func schemaStrings(raw []byte) ([]schemaString, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj     bool
		key     string
		haveKey bool
		index   int
	}
	var stack []*frame
	var out []schemaString
	pointer := func() string {
		var b strings.Builder
		for _, f := range stack {
			b.WriteByte('/')
			if f.obj {
				b.WriteString(strings.ReplaceAll(strings.ReplaceAll(f.key, "~", "~0"), "/", "~1"))
			} else {
				b.WriteString(strconv.Itoa(f.index))
			}
		}
		return b.String()
	}
	// after a value in the current container: objects expect a key next,
	// arrays move to the next index.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.obj {
				f.haveKey = false
			} else {
				f.index++
			}
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{obj: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if top != nil && top.obj && !top.haveKey {
				top.key, top.haveKey = t, true
				continue
			}
			if top != nil && top.obj && (top.key == "description" || top.key == "title") {
				start := int(before)
				for start < len(raw) && raw[start] != '"' {
					start++ // whitespace, ':' or ','
				}
				out = append(out, schemaString{ptr: pointer(), start: start, end: int(dec.InputOffset()), value: t})
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// scanResult is the description scan's verdict on one tool.
type scanResult struct {
	findings   []Finding
	quarantine bool
	// What to advertise under strip (unchanged otherwise).
	title, description        string
	inputSchema, outputSchema json.RawMessage
}

// scanTool scans one tool's listing under mode. others are the names of
// other servers' tools.
func scanTool(mode ScanMode, server string, l Listed, others map[string]bool) scanResult {
	res := scanResult{title: sanitize.Text(l.Title), description: sanitize.Text(l.Description),
		inputSchema: l.InputSchema, outputSchema: l.OutputSchema}
	if mode == ScanOff {
		return res
	}
	add := func(where string, hits []hit) bool {
		hidden := false
		for _, h := range hits {
			action := ActionQuarantined
			switch {
			case mode == ScanQuarantine:
			case h.kind == FindingInstruction || h.kind == FindingOtherTool:
				action = ActionFlagged
			default:
				action, hidden = ActionStripped, true
			}
			res.findings = append(res.findings, Finding{Server: server, Upstream: sanitize.Text(l.Name),
				Where: where, Kind: h.kind, Detail: h.detail, Action: action})
		}
		return hidden
	}
	if add("title", scanText(l.Title, others)) {
		res.title = stripHidden(l.Title)
	}
	if add("description", scanText(l.Description, others)) {
		res.description = stripHidden(l.Description)
	}
	res.inputSchema = scanSchema("inputSchema", l.InputSchema, others, add)
	res.outputSchema = scanSchema("outputSchema", l.OutputSchema, others, add)
	res.quarantine = mode == ScanQuarantine && len(res.findings) > 0
	return res
}

// scanSchema scans a schema's title and description strings and returns the
// schema with hidden characters removed from those strings (byte for byte
// the same elsewhere), or raw itself when nothing was removed.
func scanSchema(field string, raw json.RawMessage, others map[string]bool, add func(string, []hit) bool) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	strs, err := schemaStrings(raw)
	if err != nil {
		return raw // compiled already, so this does not happen; scan nothing rather than fail
	}
	var out []byte
	last := 0
	for _, s := range strs {
		if !add(field+" "+s.ptr, scanText(s.value, others)) {
			continue
		}
		lit, err := marshalNoEscape(stripHidden(s.value))
		if err != nil {
			continue
		}
		out = append(append(out, raw[last:s.start]...), lit...)
		last = s.end
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

func marshalNoEscape(s string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// quarantineReason summarises a tool's findings for Quarantined.Reason.
func quarantineReason(fs []Finding) string {
	reason := "description scan: " + fs[0].Where + ": " + fs[0].Kind + ": " + fs[0].Detail
	if len(fs) > 1 {
		reason += fmt.Sprintf(" (and %d more finding%s; toolgate check lists them)", len(fs)-1, plural(len(fs)-1))
	}
	return reason
}
