package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// nested is an arguments object whose value nests depth levels in all
// (the arguments object counts as one).
func nested(depth int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"v":`)
	for i := 1; i < depth; i++ {
		if i%2 == 0 {
			b.WriteString(`{"k":`)
		} else {
			b.WriteString(`[`)
		}
	}
	b.WriteString(`1`)
	for i := depth - 1; i >= 1; i-- {
		if i%2 == 0 {
			b.WriteString(`}`)
		} else {
			b.WriteString(`]`)
		}
	}
	b.WriteString(`}`)
	return b.Bytes()
}

// bigArgs is an arguments object of at least n bytes.
func bigArgs(n int) []byte {
	return []byte(`{"blob":"` + strings.Repeat("a", n) + `"}`)
}

// TestArgumentLimitsInValidate: arguments over the size or depth cap are
// refused with invalid_arguments before the schema, and never reach the
// upstream (issue 16, item 7: a 3 MiB object and 100-deep nesting were
// forwarded). orders__small's schema accepts any object.
func TestArgumentLimitsInValidate(t *testing.T) {
	deep100 := nested(100)
	big := bigArgs(3 << 20)
	cases := []struct {
		name   string
		limits pipeline.ArgumentLimits // zero: the config's defaults
		args   []byte
		code   string
		msg    string
	}{
		{"3 MiB over the default", pipeline.ArgumentLimits{}, big, "invalid_arguments",
			fmt.Sprintf("arguments are %d bytes, over the 1048576 byte limit", len(big))},
		{"100 deep over the default", pipeline.ArgumentLimits{}, deep100, "invalid_arguments", "arguments nest deeper than 64 levels"},
		{"64 deep within the default", pipeline.ArgumentLimits{}, nested(64), "", ""},
		{"65 deep over the default", pipeline.ArgumentLimits{}, nested(65), "invalid_arguments", "arguments nest deeper than 64 levels"},
		{"exactly at a set size", pipeline.ArgumentLimits{MaxBytes: 2048, MaxDepth: 64}, bigArgs(2048 - len(`{"blob":""}`)), "", ""},
		{"one byte over a set size", pipeline.ArgumentLimits{MaxBytes: 2048, MaxDepth: 64}, bigArgs(2049 - len(`{"blob":""}`)), "invalid_arguments",
			"arguments are 2049 bytes, over the 2048 byte limit"},
		{"a set depth", pipeline.ArgumentLimits{MaxBytes: 2048, MaxDepth: 3}, nested(4), "invalid_arguments", "arguments nest deeper than 3 levels"},
		{"brackets in strings do not count", pipeline.ArgumentLimits{MaxBytes: 2048, MaxDepth: 2},
			[]byte(`{"s":"[[[[{{{{\"[[[[","a":[1,"]]]]{"]}`), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
			chain := pipelinetest.New(t, pipelinetest.Parts{Upstreams: up, Arguments: c.limits})
			res := chain.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__small", Args: c.args})
			env := pipelinetest.Envelope(t, res)
			if got := pipelinetest.Code(env); got != c.code {
				t.Fatalf("error_code %q, want %q (message %v)", got, c.code, env.Message)
			}
			if c.code == "" {
				if up.Calls() != 1 {
					t.Fatalf("upstream called %d times, want 1", up.Calls())
				}
				return
			}
			if *env.Message != c.msg {
				t.Errorf("message %q, want %q", *env.Message, c.msg)
			}
			if up.Calls() != 0 {
				t.Errorf("refused arguments reached the upstream (%d calls)", up.Calls())
			}
		})
	}
}

// TestArgumentLimitsBeforeSchema: the caps are checked before the schema,
// so over-deep arguments that also break the schema get the depth message.
func TestArgumentLimitsBeforeSchema(t *testing.T) {
	chain := pipelinetest.New(t, pipelinetest.Parts{Arguments: pipeline.ArgumentLimits{MaxBytes: 1 << 20, MaxDepth: 2}})
	res := chain.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":[[1]]}`)})
	env := pipelinetest.Envelope(t, res)
	if got := pipelinetest.Code(env); got != "invalid_arguments" || *env.Message != "arguments nest deeper than 2 levels" {
		t.Fatalf("got %q %q, want the depth cap's answer", got, *env.Message)
	}
}

func TestNestsDeeperThan(t *testing.T) {
	cases := []struct {
		json string
		max  int
		want bool
	}{
		{`{}`, 1, false},
		{`{"a":{}}`, 1, true},
		{`{"a":{}}`, 2, false},
		{`[[[]]]`, 2, true},
		{`{"a":"{{{{{"}`, 1, false},
		{`{"a":"\"{{{{"}`, 1, false},
		{`{"a":"\\","b":{}}`, 1, true}, // an escaped backslash ends before the quote
		{`{"a":"\\\"{"}`, 1, false},
		{`{"a":[1],"b":[2],"c":{"d":3}}`, 2, false},
		{`{"a":"unterminated`, 1, false},
		{`{"\u005b":[]}`, 1, true},
	}
	for _, c := range cases {
		if got := jsonscan.NestsDeeperThan([]byte(c.json), c.max); got != c.want {
			t.Errorf("NestsDeeperThan(%s, %d) = %v, want %v", c.json, c.max, got, c.want)
		}
	}
	if !jsonscan.NestsDeeperThan(nested(100), 64) || jsonscan.NestsDeeperThan(nested(64), 64) {
		t.Error("nested(n) does not nest n levels")
	}
}

// BenchmarkNestsDeeperThan measures the depth scan on a typical small argument
// object and on a 1 MiB one (the default size cap): it runs on every call.
func BenchmarkNestsDeeperThan(b *testing.B) {
	small := []byte(`{"order_id":1234,"status":"shipped","note":"left at the door \"back\"","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}]}`)
	var big bytes.Buffer
	big.WriteString(`{"rows":[`)
	for big.Len() < 1<<20 {
		big.WriteString(`{"id":12345,"name":"a \"quoted\" name","tags":["x","y"]},`)
	}
	big.WriteString(`{}]}`)
	for _, c := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"1MiB", big.Bytes()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.b)))
			b.ReportAllocs()
			for b.Loop() {
				if jsonscan.NestsDeeperThan(c.b, 64) {
					b.Fatal("too deep")
				}
			}
		})
	}
}
