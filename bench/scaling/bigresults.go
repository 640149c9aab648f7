package scaling

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/bench/echo"
	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// The large-results figure (issue 22 keeps it: at most 150 MB): this many
// callers at once, each pulling results of this size, several times.
const (
	bigCallers   = 50
	bigResult    = 5 << 20 // 5 MiB of text
	bigCallsEach = 2
)

// bigResultFigures starts a gateway whose result limit lets 5 MiB through,
// opens 50 sessions, resets the gateway's peak RSS, has every session call
// echo's blob tool for 5 MiB twice, all at once, and reports the peak. Each
// call has arguments of its own (a tag), so that every one runs: identical
// ones would be joined and replayed by duplicate suppression. The 100
// answers (500 MiB) all come through the one upstream's pipe, so the calls
// get a minute, not the default 8 s.
func bigResultFigures(ctx context.Context, e Env, s *report.Scaling) {
	up := e.Echo
	up.Name = "go"
	g := targets.Gateway{Servers: []targets.Upstream{up}, Keys: map[string]string{principal: key}, Stdio: principal,
		Policy:         fmt.Sprintf("p, benchers, %s/%s, call, allow\ng, %s, benchers\n", up.Name, echo.Blob, principal),
		MaxResultBytes: bigResult + 64<<10, // the text and its envelope
		Timeout:        time.Minute,
	}
	gw := start(ctx, e, s, "big-results", "1 upstream, results up to 5 MiB allowed", g, up.Name+"__"+up.Tool)
	if gw == nil {
		return
	}
	defer gw.Close()
	callers, each := bigCallers, bigCallsEach
	if e.Quick {
		callers, each = 10, 1
	}
	clients, err := gw.Sessions(ctx, callers, key)
	if err != nil {
		s.Failed = append(s.Failed, fmt.Sprintf("large results: %d sessions: %v", callers, err))
		return
	}
	defer targets.CloseSessions(clients)
	if err := procstat.ResetPeak(gw.Gateway()); err != nil {
		s.Failed = append(s.Failed, fmt.Sprintf("large results: %v", err))
		return
	}
	fmt.Fprintf(e.Log, "scaling: %d callers pulling %d results of 5 MiB each\n", callers, each)
	if err := pullBlobs(ctx, clients, up.Name+"__"+echo.Blob, each); err != nil {
		s.Failed = append(s.Failed, fmt.Sprintf("large results: %v", err))
		return
	}
	m, err := procstat.ReadMemory(gw.Gateway())
	if err != nil {
		s.Failed = append(s.Failed, err.Error())
		return
	}
	s.Memory = append(s.Memory, report.MemRow{
		Situation: fmt.Sprintf("peak while %d callers each pull %d results of 5 MiB at once", callers, each),
		RSSMB:     mb(m.Peak), Note: fmt.Sprintf("VmHWM since the calls began; %.1f MB resident after", mb(m.RSS))})
}

// pullBlobs has every client call tool for a 5 MiB text n times, all
// clients at once, and checks each answer's length.
func pullBlobs(ctx context.Context, clients []*client.Client, tool string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for ci, c := range clients {
		wg.Go(func() {
			for i := range n {
				req := mcp.CallToolRequest{}
				req.Params.Name = tool
				req.Params.Arguments = map[string]any{"bytes": bigResult, "tag": fmt.Sprintf("%d-%d", ci, i)}
				res, err := c.CallTool(ctx, req)
				if err == nil && (res.IsError || len(res.Content) != 1) {
					err = fmt.Errorf("answer is not one text: %+v", res.Content)
				}
				if err == nil {
					if text, ok := res.Content[0].(mcp.TextContent); !ok || len(text.Text) != bigResult {
						err = fmt.Errorf("answer is not a %d-byte text", bigResult)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when no caller failed
}
