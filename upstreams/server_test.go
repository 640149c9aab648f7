package upstreams

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// A Server's zero limits mean none: its tools carry no deadline or cap, the
// transport has no cap, and connecting has no bound of its own.
func TestServerZeroLimitsAreNone(t *testing.T) {
	srv := &Server{Name: "s"}
	cat, err := Build([]Server{*srv}, map[string][]Listed{"s": listed("t")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cat.Resolve("t")
	if !ok || tool.Timeout != 0 || tool.MaxResultBytes != 0 {
		t.Fatalf("zero server: %+v %v", tool, ok)
	}
	if got := srv.maxMessageBytes(); got != math.MaxInt {
		t.Errorf("transport cap %d, want none", got)
	}
	if got := (&capReader{max: srv.maxMessageBytes()}).discardLimit(); got != math.MaxInt64 {
		t.Errorf("discard limit %d, want none", got)
	}
	ctx, cancel := initBound(context.Background(), srv)
	defer cancel()
	if _, has := ctx.Deadline(); has {
		t.Error("a zero InitTimeout bounds the attempt")
	}
	srv.InitTimeout = time.Second
	ctx, cancel = initBound(context.Background(), srv)
	defer cancel()
	if _, has := ctx.Deadline(); !has {
		t.Error("InitTimeout does not bound the attempt")
	}
}

// The transport cap is the largest result cap of any tool plus framing; a
// tool's zero cap is the server's.
func TestServerMaxMessageBytes(t *testing.T) {
	srv := &Server{Name: "s", MaxResultBytes: 1000, Tools: map[string]ToolLimits{"big": {MaxResultBytes: 5000}, "slow": {Timeout: time.Minute}}}
	if got, want := srv.maxMessageBytes(), 5000+frameSlack; got != want {
		t.Errorf("maxMessageBytes = %d, want %d", got, want)
	}
	if srv.maxResultBytes("slow") != 1000 || srv.callTimeout("slow") != time.Minute || srv.callTimeout("big") != 0 {
		t.Errorf("per-tool fallback: slow %d %v, big %v", srv.maxResultBytes("slow"), srv.callTimeout("slow"), srv.callTimeout("big"))
	}
}

// Servers are keyed by name: a missing or repeated name fails Build and
// Start before anything starts.
func TestServerNamesMustBeUnique(t *testing.T) {
	for _, tt := range []struct {
		servers []Server
		want    string
	}{
		{[]Server{{Name: "a"}, {Name: "a"}}, `server "a" given twice`},
		{[]Server{{Name: "a"}, {}}, "a server has no name"},
	} {
		if _, err := Build(tt.servers, nil, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Build: %v, want %q", err, tt.want)
		}
		if _, err := Start(context.Background(), tt.servers, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Start: %v, want %q", err, tt.want)
		}
	}
}

// Build takes the servers in the order given: the first server to offer a
// resource URI keeps it, whatever the names' order.
func TestBuildKeepsServerOrder(t *testing.T) {
	feats := map[string]*ServerFeatures{
		"b": {HasResources: true, Resources: []mcp.Resource{{URI: "u://1", Name: "from b"}}},
		"a": {HasResources: true, Resources: []mcp.Resource{{URI: "u://1", Name: "from a"}}},
	}
	cat, err := BuildWith([]Server{{Name: "b"}, {Name: "a"}}, nil, nil, BuildOptions{Features: feats})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := cat.Features().Resource("u://1"); !ok || r.Server != "b" {
		t.Errorf("u://1: %+v, want server b's", r)
	}
}
