package targets

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The npm packages bench/npm/package.json pins, by the binary each installs.
var npmBins = []string{"mcp-proxy", "supergateway", "mcp-server-everything"}

// EnsureNPM installs bench/npm's packages unless their binaries are there.
func EnsureNPM(ctx context.Context, dir string) error {
	missing := false
	for _, b := range npmBins {
		if _, err := os.Stat(NPMBin(dir, b)); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm install in %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NPMBin is the path of an installed npm package's binary.
func NPMBin(dir, name string) string {
	return filepath.Join(dir, "node_modules", ".bin", name)
}

// StartMCPProxy runs npm mcp-proxy in front of up: one upstream process for
// all sessions, Streamable HTTP at /mcp, on loopback.
func StartMCPProxy(ctx context.Context, client Client, npmDir string, up Upstream) (Target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", fmt.Sprint(port), "--host", "127.0.0.1", "--server", "stream", "--", up.Command}, up.Args...)
	return startListening(ctx, client, "mcp-proxy", NPMBin(npmDir, "mcp-proxy"), args, up.Env, up.Tool, port)
}

// StartSupergateway runs npm supergateway in front of up, stateful (without
// it, it spawns the upstream per request): one upstream process per
// session, ended when the session is deleted. It binds every interface and
// has no option not to; only loopback is ever connected to.
func StartSupergateway(ctx context.Context, client Client, npmDir string, up Upstream) (Target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	command := shellQuote(append([]string{up.Command}, up.Args...))
	args := []string{"--stdio", command, "--outputTransport", "streamableHttp", "--stateful",
		"--port", fmt.Sprint(port), "--logLevel", "none"}
	return startListening(ctx, client, "supergateway", NPMBin(npmDir, "supergateway"), args, up.Env, up.Tool, port)
}

// startListening runs bin, a proxy serving Streamable HTTP at /mcp on port
// of loopback, with env added to its environment, and waits until the port
// accepts connections. tool is the client-facing tool name.
func startListening(ctx context.Context, client Client, name, bin string, args []string, env map[string]string, tool string, port int) (Target, error) {
	p, err := startProcess(bin, args, env, "")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitPort(ctx, p, addr); err != nil {
		_ = p.stop(stopGrace)
		return nil, err
	}
	return &httpTarget{name: name, client: client, proc: p, url: "http://" + addr + "/mcp", tool: tool, hc: httpClient()}, nil
}

// freePort asks the kernel for a free loopback port. The peers take a port
// number, not a listener, so another process could take it first: the
// start then fails and the peer is reported as not measured.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitPort waits until addr accepts connections, failing as soon as the
// process exits. The peers print nothing reliable when they are ready, so
// the port itself is the signal; between attempts the wait backs off.
func waitPort(ctx context.Context, p *process, addr string) error {
	delay := 10 * time.Millisecond
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before listening on %s (%v); last output:\n%s", addr, p.err, p.lastOutput())
		case <-ctx.Done():
			return fmt.Errorf("not listening on %s: %w; last output:\n%s", addr, ctx.Err(), p.lastOutput())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// shellQuote joins words into one POSIX shell command line.
func shellQuote(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
