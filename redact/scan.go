package redact

import "strings"

// maxPatterns bounds the patterns of one Redactor: the scan reports the
// patterns found in a text as one bit each of a uint64.
const maxPatterns = 64

// scanner finds which patterns' keywords occur in a text in one pass over
// it, rather than one substring search per keyword (33 for the defaults):
// at each byte, the pair it starts is looked up in a bitset of the pairs
// keywords start with (8 KiB, it stays in the L1 cache), and only the rare
// hits compare whole keywords. A one-byte keyword has no pair: it is
// compared at every occurrence of its byte.
type scanner struct {
	pairs  [1 << 16 / 64]uint64 // bit a<<8|b: some keyword starts with the bytes a, b
	first  [256][]keywordRef    // the keywords, by their first byte
	single [256]bool            // a one-byte keyword is this byte
	always uint64               // patterns without keywords: they run on every text
}

type keywordRef struct {
	keyword string
	pattern int
	near    func(string, int) bool
}

func newScanner(ps []compiled) *scanner {
	sc := &scanner{}
	for i, p := range ps {
		if len(p.keywords) == 0 {
			sc.always |= 1 << i
			continue
		}
		for _, k := range p.keywords {
			sc.first[k[0]] = append(sc.first[k[0]], keywordRef{keyword: k, pattern: i, near: p.near})
			if len(k) == 1 {
				sc.single[k[0]] = true
				continue
			}
			pair := uint16(k[0])<<8 | uint16(k[1])
			sc.pairs[pair>>6] |= 1 << (pair & 63)
		}
	}
	return sc
}

// scan is the set of patterns (bit i: pattern i) with a keyword
// occurrence in s that passes the pattern's near check.
func (sc *scanner) scan(s string) uint64 {
	found := sc.always
	for i := 0; i < len(s); i++ {
		if i+1 < len(s) {
			pair := uint16(s[i])<<8 | uint16(s[i+1])
			if sc.pairs[pair>>6]&(1<<(pair&63)) == 0 && !sc.single[s[i]] {
				continue
			}
		}
		refs := sc.first[s[i]]
		for j := range refs {
			r := &refs[j]
			if found&(1<<r.pattern) == 0 && strings.HasPrefix(s[i:], r.keyword) && (r.near == nil || r.near(s, i)) {
				found |= 1 << r.pattern
			}
		}
	}
	return found
}
