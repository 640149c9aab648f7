package proxy

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The shapes clients see: a listed tool and answers to calls. A change here
// is a change to the public contract, so it must show up in review.
func TestAnswerShapesGolden(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(`{"_meta":{"x":1},"content":[{"type":"text","text":"{\"value\":7}"}],"structuredContent":{"value":7}}`)}
	cat := pipelinetest.Catalog(t)
	p := pipelinetest.New(t, pipelinetest.Parts{Upstreams: up, Catalog: cat})
	alice, bob := pipelinetest.Alice, pipelinetest.Bob
	typed, _ := cat.Resolve("orders__typed")
	cases := map[string]any{
		"listed_tool":   clientTool(typed),
		"success":       p.Handle(context.Background(), Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)}),
		"not_allowed":   p.Handle(context.Background(), Call{Subject: bob, Name: "orders__typed", Args: []byte(`{}`)}),
		"invalid_args":  p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":"x"}`)}),
		"tool_notfound": p.Handle(context.Background(), Call{Subject: alice, Name: "nope", Args: nil}),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./proxy -run Golden -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s changed:\n got %s\nwant %s", path, got, want)
			}
		})
	}
}
