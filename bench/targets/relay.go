package targets

import (
	"context"
	"fmt"
	"sort"
)

// Relay is how to run the zero-check Go relay (bench/relay): its command,
// the built bench/cmd/relay or a binary that acts as it, and what its own
// process's environment needs.
type Relay struct {
	Command []string
	Env     map[string]string
}

// args is the relay's command line in front of up, serving Streamable HTTP
// at addr, or stdio when addr is empty. up's environment goes to the
// upstream through the relay's -env flags, not to the relay itself.
func (r Relay) args(addr string, up Upstream) []string {
	args := append([]string(nil), r.Command[1:]...)
	if addr != "" {
		args = append(args, "-http", addr)
	}
	keys := make([]string, 0, len(up.Env))
	for k := range up.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-env", k+"="+up.Env[k])
	}
	return append(append(args, "--", up.Command), up.Args...)
}

// StartRelayHTTP runs the relay in front of up, serving Streamable HTTP at
// /mcp on a free loopback port: one upstream process for all sessions. It
// listens only once it has listed the upstream's tools, so the port is the
// signal it is ready. Its tools keep the upstream's names.
func StartRelayHTTP(ctx context.Context, client Client, name string, r Relay, up Upstream) (Target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return startListening(ctx, client, name, r.Command[0], r.args(addr, up), r.Env, up.Tool, port)
}

// StartRelayStdio runs the relay in front of up as an MCP server over
// stdio, the workers sharing its one session.
func StartRelayStdio(ctx context.Context, client Client, name string, r Relay, up Upstream) (Target, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return startStdioWith(ctx, client, name, r.Command[0], r.args("", up), r.Env, up.Tool, true)
}
