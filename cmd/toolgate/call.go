package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// runCall is a small MCP client for admins and scripts: it calls one tool
// through a running gateway and prints the envelope. Exit status: 0 when
// ok, 1 when the envelope says ok:false, 2 on usage and other errors,
// exitUnreachable (3) when nothing answers at --url, exitKeyRefused (4)
// when the gateway refuses the key (gatewayerr.go).
func runCall(args []string) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/mcp", "the gateway's Streamable HTTP endpoint")
	key := fs.String("key", os.Getenv("TOOLGATE_KEY"), "API key (default $TOOLGATE_KEY)")
	list := fs.Bool("list", false, "list the tools this key may call instead of calling one")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	seen := &authStatus{base: http.DefaultTransport}
	fail := func(err error) int { return callFailure(os.Stderr, *url, *key, seen, err) }
	c, err := dialGateway(ctx, *url, *key, transport.WithHTTPBasicClient(&http.Client{Transport: seen}))
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	if *list {
		return listTools(ctx, c, os.Stdout, fail)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(os.Stderr, "usage: toolgate call [--url URL] [--key KEY] <tool> [json-args]")
		return 2
	}
	argsJSON := "{}"
	if fs.NArg() == 2 {
		argsJSON = fs.Arg(1)
	}
	return callTool(ctx, c, fs.Arg(0), argsJSON, os.Stdout, fail)
}

func dialGateway(ctx context.Context, url, key string, opts ...transport.StreamableHTTPCOption) (*client.Client, error) {
	if key != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-call", Version: version}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return c, nil
}

func listTools(ctx context.Context, c *client.Client, out io.Writer, fail func(error) int) int {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fail(err)
	}
	for _, t := range res.Tools {
		fmt.Fprintf(out, "%-40s %s\n", t.Name, t.Description)
	}
	return 0
}

func callTool(ctx context.Context, c *client.Client, name, argsJSON string, out io.Writer, fail func(error) int) int {
	if !json.Valid([]byte(argsJSON)) {
		fmt.Fprintf(os.Stderr, "toolgate call: arguments are not valid JSON: %s\n", argsJSON)
		return 2
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = json.RawMessage(argsJSON)
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fail(err)
	}
	// The raw bytes keep big integers exact; the decoded value would not.
	env := []byte(res.RawStructuredContent)
	if len(env) == 0 {
		env, _ = json.Marshal(res.StructuredContent)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, env, "", "  ") != nil {
		pretty.Write(env)
	}
	fmt.Fprintln(out, pretty.String())
	if res.IsError {
		return 1
	}
	return 0
}
