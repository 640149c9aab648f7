package scaling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/bench/echo"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// Principals of the catalog gateways, by what policy shows them.
var listPrincipals = []struct{ name, key, what string }{
	{principal, key, "every server"},
	{"one", "tg_bench_scaling_one", "one server"},
	{"few", "tg_bench_scaling_few", "10 tools"},
}

// catalogFigures compares a 10-tool catalog (one upstream) with a
// 10,000-tool one (20 upstreams of 500), then times tools/list on both
// for principals who see everything, one server, or ten tools.
func catalogFigures(ctx context.Context, e Env, s *report.Scaling) {
	layouts := []struct{ servers, perServer int }{{1, 10}, {20, 500}}
	var vs []variant
	for _, l := range layouts {
		total := l.servers * l.perServer
		g := catalogGateway(e, l.servers, l.perServer)
		label := fmt.Sprintf("%s catalog tools, %s", report.Thousands(total), upstreams(l.servers))
		gw := start(ctx, e, s, fmt.Sprintf("catalog-%d", total), label, g, "u00__"+echo.Tool)
		vs = append(vs, variant{label: label, gw: gw})
	}
	defer stopAll(vs)
	s.Cost = append(s.Cost, compare(ctx, e, "10 vs 10,000 catalog tools", vs))
	for i, v := range vs {
		if v.gw == nil {
			continue
		}
		total := layouts[i].servers * layouts[i].perServer
		for _, p := range listPrincipals {
			row, err := toolsList(ctx, e, v.gw, p.key)
			if err != nil {
				s.Failed = append(s.Failed, fmt.Sprintf("tools/list as %s on %d tools: %v", p.name, total, err))
				continue
			}
			row.Catalog, row.Principal = total, fmt.Sprintf("%s (%s)", p.name, p.what)
			s.ToolsList = append(s.ToolsList, row)
		}
	}
}

func upstreams(n int) string {
	if n == 1 {
		return "1 upstream"
	}
	return fmt.Sprintf("%d upstreams", n)
}

// catalogGateway is servers upstreams u00, u01, ... of perServer tools each
// (echo and filler), with a policy giving bench every server, one the
// first server, and few ten tools spread over the servers.
func catalogGateway(e Env, servers, perServer int) targets.Gateway {
	var ups []targets.Upstream
	var policy strings.Builder
	for i := range servers {
		up := e.Echo
		up.Name = fmt.Sprintf("u%02d", i)
		up.Args = append(slices.Clone(e.Echo.Args), "-name", up.Name, "-extra-tools", fmt.Sprint(perServer-1))
		ups = append(ups, up)
		fmt.Fprintf(&policy, "p, all_servers, %s/*, call, allow\n", up.Name)
	}
	policy.WriteString("p, one_server, u00/*, call, allow\n")
	for i := range 10 { // ten distinct tools, spread over the servers
		tool := echo.Tool
		if i/servers < perServer-1 {
			tool = echo.ExtraName(i / servers)
		}
		fmt.Fprintf(&policy, "p, ten_tools, u%02d/%s, call, allow\n", i%servers, tool)
	}
	fmt.Fprintf(&policy, "g, %s, all_servers\ng, one, one_server\ng, few, ten_tools\n", principal)
	keys := map[string]string{}
	for _, p := range listPrincipals {
		keys[p.name] = p.key
	}
	return targets.Gateway{Servers: ups, Policy: policy.String(), Keys: keys, Stdio: principal}
}

// toolsList times sequential tools/list calls on one session.
func toolsList(ctx context.Context, e Env, gw *targets.Toolgate, key string) (report.ListRow, error) {
	clients, err := gw.Sessions(ctx, 1, key)
	if err != nil {
		return report.ListRow{}, err
	}
	defer targets.CloseSessions(clients)
	calls := 30
	if e.Quick {
		calls = 3
	}
	lat := make([]time.Duration, 0, calls)
	visible := 0
	for range calls {
		t0 := time.Now()
		res, err := clients[0].ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return report.ListRow{}, err
		}
		lat = append(lat, time.Since(t0))
		visible = len(res.Tools)
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / float64(time.Millisecond) }
	return report.ListRow{Visible: visible, Calls: calls, P50Ms: q(0.5), P99Ms: q(0.99)}, nil
}
