package upstreams

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An attempt cut off by init_timeout says which request went unanswered,
// within how long, and which config keys raise the bound; for npx and uvx
// it adds that the first start downloads packages (issue 16, item 13).
func TestBoundErrMessage(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cause := errors.New("initialize: context deadline exceeded")
	raise := "raise it with mcpServers.%s.init_timeout (this server) or limits.init_timeout (every server)"
	cases := []struct {
		name string
		srv  Server
		err  error
		want []string
		not  []string
	}{
		{"plain", Server{Name: "orders", Transport: TransportStdio, Command: "/usr/local/bin/orders-mcp", InitTimeout: 10 * time.Second}, cause,
			[]string{"did not answer initialize within init_timeout 10s: initialize: context deadline exceeded; " + strings.Replace(raise, "%s", "orders", 1)},
			[]string{"download", "tools/list"}},
		{"http", Server{Name: "search", Transport: TransportHTTP, URL: "https://search.example/mcp", InitTimeout: 1500 * time.Millisecond}, cause,
			[]string{"did not answer initialize within init_timeout 1.5s", strings.Replace(raise, "%s", "search", 1)},
			[]string{"download"}},
		{"npx", Server{Name: "everything", Transport: TransportStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, InitTimeout: 10 * time.Second}, cause,
			[]string{"did not answer initialize within init_timeout 10s", strings.Replace(raise, "%s", "everything", 1),
				"; npx downloads the server's packages on its first start, which on a cold cache can take longer than that"},
			nil},
		{"uvx by path", Server{Name: "fetch", Transport: TransportStdio, Command: "/home/you/.local/bin/uvx", Args: []string{"mcp-server-fetch"}, InitTimeout: 10 * time.Second}, cause,
			[]string{"; uvx downloads the server's packages on its first start"}, nil},
		{"npx.cmd", Server{Name: "everything", Transport: TransportStdio, Command: `C:\Program Files\nodejs\npx.cmd`, InitTimeout: 10 * time.Second}, cause,
			[]string{"; npx downloads"}, nil},
		{"not npx", Server{Name: "x", Transport: TransportStdio, Command: "npx-like", InitTimeout: 10 * time.Second}, cause,
			nil, []string{"download"}},
		{"tools/list", Server{Name: "orders", Transport: TransportStdio, Command: "orders-mcp", InitTimeout: 10 * time.Second}, errors.New("tools/list: context deadline exceeded"),
			[]string{"answered initialize but not tools/list within init_timeout 10s, which bounds the two together: tools/list: context deadline exceeded; " + strings.Replace(raise, "%s", "orders", 1)},
			[]string{"did not answer initialize"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := boundErr(expired, &c.srv, c.err)
			if !errors.Is(err, c.err) {
				t.Errorf("%v does not wrap the cause", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("message %q has %q", err, w)
				}
			}
		})
	}

	// Not the bound: the error as it came, npx or not.
	npx := Server{Name: "everything", Transport: TransportStdio, Command: "npx", InitTimeout: 10 * time.Second}
	if err := boundErr(context.Background(), &npx, cause); err != cause {
		t.Errorf("a failure before the deadline: %v, want the cause unchanged", err)
	}
	canceled, stop := context.WithCancel(context.Background())
	stop()
	if err := boundErr(canceled, &npx, cause); err != cause {
		t.Errorf("a cancelled attempt (shutdown): %v, want the cause unchanged", err)
	}
	unbounded := npx
	unbounded.InitTimeout = 0
	if err := boundErr(expired, &unbounded, cause); err != cause {
		t.Errorf("no init_timeout: %v, want the cause unchanged", err)
	}
}
