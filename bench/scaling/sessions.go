package scaling

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// sessionFigures starts a gateway in front of 10 upstreams, reads its idle
// memory, opens 1,000 initialised sessions and reads it again.
func sessionFigures(ctx context.Context, e Env, s *report.Scaling) {
	g := catalogGateway(e, 10, 1)
	gw := start(ctx, e, s, "sessions", "10 upstreams", g, "u00__echo")
	if gw == nil {
		return
	}
	defer gw.Close()
	n := 1000
	if e.Quick {
		n = 50
	}
	before, err := procstat.ReadMemory(gw.Gateway())
	if err != nil {
		s.Failed = append(s.Failed, err.Error())
		return
	}
	fmt.Fprintf(e.Log, "scaling: opening %d sessions\n", n)
	clients, err := gw.Sessions(ctx, n, key)
	if err != nil {
		s.Failed = append(s.Failed, fmt.Sprintf("%d sessions: %v", n, err))
		return
	}
	with, err := procstat.ReadMemory(gw.Gateway())
	targets.CloseSessions(clients)
	if err != nil {
		s.Failed = append(s.Failed, err.Error())
		return
	}
	perSession := float64(with.RSS-before.RSS) / float64(n) / 1024
	s.Memory = append(s.Memory, report.MemRow{Situation: fmt.Sprintf("%s sessions open (initialised), 10 upstreams", report.Thousands(n)),
		RSSMB: mb(with.RSS), Note: fmt.Sprintf("%+.1f KB per session over idle", perSession)})
}
