// Package targets starts what the load harness measures and opens client
// sessions on it: an upstream called directly, toolgate over Streamable
// HTTP and over stdio, the zero-check Go relay (bench/relay) over each, and
// the npm peer proxies. Every target is a real
// process tree the harness started, so its CPU and memory can be read from
// /proc and it can be stopped whole. The sessions are the lean client's
// (lean_*.go) or mcp-go's, as the harness chooses (Client).
package targets

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bench/procstat"
)

// Upstream is an MCP server over stdio that the targets put in front of.
type Upstream struct {
	Name    string            // row label and server name in gateway configs: [a-z0-9]+
	Command string            // absolute path
	Args    []string          // after Command
	Env     map[string]string // added to the environment
	Tool    string            // the echo-like tool's name on the upstream
}

// Target is one way of reaching an upstream.
type Target interface {
	// Name is the row label: direct, relay-http, relay-stdio, toolgate-http, toolgate-stdio, mcp-proxy, supergateway.
	Name() string
	// Open opens n client sessions, one per load worker, and a func that
	// closes them. Over stdio there is one session per process: the n
	// workers share it, with calls in flight concurrently.
	Open(ctx context.Context, n int) ([]load.Session, func(), error)
	// Gateway is the pid of the gateway or proxy process; 0 when there is
	// none (direct).
	Gateway() int
	// Upstreams lists the pids of the upstream processes now.
	Upstreams() []int
	// Close stops every process the target started.
	Close() error
}

// stdioTarget reaches an MCP server over stdio with one shared client:
// an upstream directly, or `toolgate serve --stdio` in front of one.
type stdioTarget struct {
	name    string
	c       *client.Client
	cmd     *exec.Cmd // set by the transport's command func
	tool    string    // client-facing tool name
	gateway bool      // the process is a gateway, its children the upstream
}

// startStdioWith spawns command as an MCP server over stdio and opens the
// session the workers share with the client chosen.
func startStdioWith(ctx context.Context, client Client, name, command string, args []string, env map[string]string, tool string, gateway bool) (Target, error) {
	if client == MCPGo {
		t, err := startStdio(ctx, name, command, args, env, tool, gateway)
		if err != nil {
			return nil, err // not a nil *stdioTarget in a Target
		}
		return t, nil
	}
	return startLeanStdio(ctx, name, command, args, env, tool, gateway)
}

// startStdio spawns command as an MCP server over stdio and initialises
// mcp-go's client on it.
func startStdio(ctx context.Context, name, command string, args []string, env map[string]string, tool string, gateway bool) (*stdioTarget, error) {
	t := &stdioTarget{name: name, tool: tool, gateway: gateway}
	spawn := func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
		t.cmd = exec.CommandContext(ctx, command, args...)
		t.cmd.Env = mergeEnv(env)
		t.cmd.SysProcAttr = childAttr()
		return t.cmd, nil
	}
	tr := transport.NewStdioWithOptions(command, nil, args, transport.WithCommandFunc(spawn))
	// The client's Start context owns the child for its whole life: it must
	// outlive this call.
	if err := tr.Start(context.Background()); err != nil {
		return nil, err
	}
	t.c = client.NewClient(tr)
	ictx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := initialize(ictx, t.c); err != nil {
		t.Close()
		return nil, withStderr(err, t.c)
	}
	return t, nil
}

// withStderr adds the tail of a stdio child's stderr to err.
func withStderr(err error, c *client.Client) error {
	r, ok := client.GetStderr(c)
	if !ok {
		return err
	}
	buf := make([]byte, 4096)
	n, _ := r.Read(buf)
	if n == 0 {
		return err
	}
	return &wrapped{err, "stderr: " + strings.TrimSpace(string(buf[:n]))}
}

// wrapped is an error with what the child said about it.
type wrapped struct {
	err    error
	detail string
}

func (w *wrapped) Error() string { return w.err.Error() + "; " + w.detail }
func (w *wrapped) Unwrap() error { return w.err }

func (t *stdioTarget) Name() string { return t.name }

func (t *stdioTarget) Open(_ context.Context, n int) ([]load.Session, func(), error) {
	sessions := make([]load.Session, n)
	for i := range sessions {
		sessions[i] = call{c: t.c, tool: t.tool}
	}
	return sessions, func() {}, nil
}

func (t *stdioTarget) Gateway() int {
	if t.gateway {
		return t.cmd.Process.Pid
	}
	return 0
}

func (t *stdioTarget) Upstreams() []int {
	if t.gateway {
		return procstat.Descendants(t.cmd.Process.Pid)
	}
	return append([]int{t.cmd.Process.Pid}, procstat.Descendants(t.cmd.Process.Pid)...)
}

// Close closes stdin; the child ends on EOF (mcp-go signals it after a
// grace period otherwise), then its group is killed for leftovers.
func (t *stdioTarget) Close() error {
	err := t.c.Close()
	killGroup(t.cmd)
	return err
}

// httpTarget reaches a gateway or proxy over Streamable HTTP, a session per
// worker.
type httpTarget struct {
	name    string
	client  Client
	proc    *process
	url     string
	headers map[string]string
	tool    string
	hc      *http.Client
}

func (t *httpTarget) Name() string { return t.name }

func (t *httpTarget) Open(ctx context.Context, n int) ([]load.Session, func(), error) {
	sessions, closeSessions, err := t.open(ctx, n)
	if err != nil && t.proc.exited() {
		err = &wrapped{err, "the process exited; last output:\n" + t.proc.lastOutput()}
	}
	return sessions, closeSessions, err
}

// open opens the sessions with the target's client.
func (t *httpTarget) open(ctx context.Context, n int) ([]load.Session, func(), error) {
	if t.client != MCPGo {
		return openLeanHTTPSessions(ctx, n, t.hc, t.url, t.headers, t.tool)
	}
	clients, err := openHTTPSessions(ctx, n, t.hc, t.url, t.headers)
	if err != nil {
		return nil, nil, err
	}
	sessions := make([]load.Session, n)
	for i, c := range clients {
		sessions[i] = call{c: c, tool: t.tool}
	}
	return sessions, func() { closeAll(clients) }, nil
}

func (t *httpTarget) Gateway() int { return t.proc.pid() }

func (t *httpTarget) Upstreams() []int { return procstat.Descendants(t.proc.pid()) }

// stopGrace is how long a gateway or proxy gets to stop by itself.
const stopGrace = 10 * time.Second

func (t *httpTarget) Close() error {
	t.hc.CloseIdleConnections()
	return t.proc.stop(stopGrace)
}
