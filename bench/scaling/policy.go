package scaling

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// policyFigures compares a 10-line policy with a 100,000-line one.
func policyFigures(ctx context.Context, e Env, s *report.Scaling) {
	up := e.Echo
	up.Name = "go"
	var vs []variant
	for _, n := range []int{10, 100_000} {
		label := fmt.Sprintf("%s policy lines", report.Thousands(n))
		g := targets.Gateway{Servers: []targets.Upstream{up}, Policy: policyLines(n, up.Name, up.Tool),
			Keys: map[string]string{principal: key}, Stdio: principal}
		gw := start(ctx, e, s, fmt.Sprintf("policy-%d", n), fmt.Sprintf("1 upstream, %s policy lines", report.Thousands(n)), g, up.Name+"__"+up.Tool)
		vs = append(vs, variant{label: label, gw: gw})
	}
	defer stopAll(vs)
	s.Cost = append(s.Cost, compare(ctx, e, "10 vs 100,000 policy lines", vs))
}

// policyLines is a policy of exactly n lines (n >= 2) of which two let the
// caller call server/tool; the rest are filler that applies to other
// subjects only, in blocks of ten per role: seven allow lines on other
// tools, one deny on the caller's very tool, two principals in the role.
// The shape keeps Casbin's work honest: every p line has to be looked at,
// and the role graph is large.
func policyLines(n int, server, tool string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "p, benchers, %s/%s, call, allow\ng, %s, benchers\n", server, tool, principal)
	for i := 0; i < n-2; i++ {
		role := i / 10
		switch k := i % 10; {
		case k < 7:
			fmt.Fprintf(&b, "p, role_%05d, %s/tool_%05d, call, allow\n", role, server, (role*7+k)%10000)
		case k == 7:
			fmt.Fprintf(&b, "p, role_%05d, %s/%s, call, deny\n", role, server, tool)
		default:
			fmt.Fprintf(&b, "g, user_%06d, role_%05d\n", role*2+k-8, role)
		}
	}
	return b.String()
}
