package gateway

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz/shadow"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/ratelimit"
)

func chainNames(t *testing.T) []string {
	t.Helper()
	return Chain(pipeline.Options{}, Links{Execute: &pipeline.Executor{}}).Names()
}

// The README's table of links is the chain, in the chain's order: a link
// added, removed or moved in chain.go without the table fails here.
func TestReadmeTableIsTheChain(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## What it does\n")
	if !ok {
		t.Fatal(`README.md has no "## What it does" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var table []string
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| link ") {
			continue
		}
		table = append(table, strings.TrimSpace(cells[1]))
	}
	if want := chainNames(t); !slices.Equal(table, want) {
		t.Fatalf("README table lists %v;\ngateway/chain.go runs %v", table, want)
	}
}

// The test kit builds chains in the gateway's order, so that a guard's
// tests see the links before and after it that the gateway runs.
func TestTestKitKeepsTheGatewayOrder(t *testing.T) {
	var rec *pipeline.Recorder
	shadowLink := (*shadow.Guard)(nil).Link()
	kit := pipelinetest.New(t, pipelinetest.Parts{Shadow: &shadowLink, Guards: []pipeline.Link{
		(*ratelimit.Guard)(nil).Link(), rec.Gate(), (*approvals.Guard)(nil).Link(), (*dedup.Guard)(nil).Link(),
	}}).Names()
	if want := chainNames(t); !slices.Equal(kit, want) {
		t.Fatalf("pipelinetest builds %v;\ngateway/chain.go runs %v", kit, want)
	}
}
