package discovery

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// terms splits text into the terms the index and queries share: words
// split at anything but letters and digits, at camelCase humps and at
// letter-digit boundaries (TwilioApiV2010--CreateMessage is twilio, api,
// v, 2010, create, message), lowercased, without English stop words and
// one-letter words, and stemmed (Snowball's English stemmer, so "messages"
// finds "message" and "recording" finds "record").
func terms(text string) []string {
	var out []string
	for _, w := range words(text) {
		w = strings.ToLower(w)
		if len(w) < 2 || english.IsStopWord(w) {
			continue
		}
		out = append(out, english.Stem(w, false))
	}
	return out
}

// words cuts text into runs of letters or of digits, also where a
// lowercase letter is followed by an uppercase one and where an uppercase
// run ends in the start of a capitalised word (HTTPServer: HTTP, Server).
func words(text string) []string {
	var out []string
	rs := []rune(text)
	start := -1
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if start >= 0 {
				out = append(out, string(rs[start:i]))
				start = -1
			}
			continue
		}
		if start >= 0 && boundary(rs, i) {
			out = append(out, string(rs[start:i]))
			start = i
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, string(rs[start:]))
	}
	return out
}

// boundary reports whether a word starts at rs[i], within a run of
// letters and digits.
func boundary(rs []rune, i int) bool {
	prev, cur := rs[i-1], rs[i]
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(cur):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(cur):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
		return true
	}
	return false
}
