package discovery

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/upstreams"
)

// Index ranks a catalog's tools for a query with BM25, over one document
// per tool whose fields are weighted (a simplified BM25F: each field's
// term counts are multiplied by its weight before the usual saturation and
// length normalisation):
//
//   - the client-facing name, with the server's name, weight 3: names are
//     short and chosen to say what the tool does (create_pull_request);
//   - the title, weight 2;
//   - the description and the input schema's top-level parameter names,
//     weight 1: long, and full of words every tool of a server shares.
//
// k1 = 1.2 and b = 0.75 are BM25's usual values. A hand-written index
// rather than a search library: a catalog is at most a few thousand short
// documents held in memory and rebuilt only when the catalog changes
// (the 1,020 tools of testdata/catalog.jsonl in about 100 ms), while the full-text libraries for Go bring
// analyzers, on-disk segments and dozens of modules for what is here about
// 150 lines; the one library used is the Snowball stemmer (tokens.go).
type Index struct {
	docs   []doc
	df     map[string]int // documents holding each term
	avgLen float64
}

type doc struct {
	tool *upstreams.Tool
	tf   map[string]float64 // weighted term counts
	len  float64            // weighted length
}

// Field weights; see Index.
const (
	nameWeight  = 3
	titleWeight = 2
	textWeight  = 1
	k1, b       = 1.2, 0.75
)

// NewIndex indexes tools (a catalog snapshot's callable tools).
func NewIndex(tools []*upstreams.Tool) *Index {
	ix := &Index{docs: make([]doc, 0, len(tools)), df: map[string]int{}}
	total := 0.0
	for _, t := range tools {
		d := doc{tool: t, tf: map[string]float64{}}
		d.add(nameTerms(t), nameWeight)
		d.add(terms(t.Title), titleWeight)
		d.add(terms(t.Description), textWeight)
		d.add(terms(strings.Join(parameterNames(t.InputSchema), " ")), textWeight)
		for term := range d.tf {
			ix.df[term]++
		}
		total += d.len
		ix.docs = append(ix.docs, d)
	}
	if len(ix.docs) > 0 {
		ix.avgLen = total / float64(len(ix.docs))
	}
	return ix
}

func (d *doc) add(ts []string, weight float64) {
	for _, t := range ts {
		d.tf[t] += weight
	}
	d.len += weight * float64(len(ts))
}

// nameTerms are the terms of the client-facing name, and of the server's
// name when the name does not carry it already (an unprefixed server).
func nameTerms(t *upstreams.Tool) []string {
	ts := terms(t.Name)
	for _, s := range terms(t.Server) {
		if !slices.Contains(ts, s) {
			ts = append(ts, s)
		}
	}
	return ts
}

// parameterNames are the top-level properties of an input schema.
func parameterNames(schema []byte) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Hit is one search result.
type Hit struct {
	Tool  *upstreams.Tool
	Score float64
}

// Search ranks the tools keep accepts for query and returns the best
// limit of them, best first (ties by name). Tools keep refuses are never
// returned, however well they match: keep is where policy and the toolset
// decide. A query with no indexed term finds nothing.
func (ix *Index) Search(query string, keep func(*upstreams.Tool) bool, limit int) []Hit {
	qs := uniqueTerms(query)
	if len(qs) == 0 || limit <= 0 {
		return nil
	}
	n := float64(len(ix.docs))
	idf := make([]float64, len(qs))
	for i, q := range qs {
		df := float64(ix.df[q])
		idf[i] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	var hits []Hit
	for i := range ix.docs {
		d := &ix.docs[i]
		score := 0.0
		for j, q := range qs {
			if tf := d.tf[q]; tf > 0 {
				score += idf[j] * tf * (k1 + 1) / (tf + k1*(1-b+b*d.len/ix.avgLen))
			}
		}
		if score > 0 && keep(d.tool) {
			hits = append(hits, Hit{Tool: d.tool, Score: score})
		}
	}
	slices.SortFunc(hits, func(x, y Hit) int {
		if x.Score != y.Score {
			if x.Score > y.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Tool.Name, y.Tool.Name)
	})
	return hits[:min(limit, len(hits))]
}

func uniqueTerms(query string) []string {
	var out []string
	for _, t := range terms(query) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Cache holds the index of the latest catalog snapshot it was asked
// about, built on the first search after the catalog changed. The zero
// Cache is ready.
type Cache struct {
	mu  sync.Mutex
	cat *upstreams.Catalog
	ix  *Index
}

// For is the index of cat's callable tools.
func (c *Cache) For(cat *upstreams.Catalog) *Index {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cat != cat || c.ix == nil {
		c.cat, c.ix = cat, NewIndex(cat.Tools())
	}
	return c.ix
}
