package targets

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/bench/load"
)

// protocolVersion is what every session asks for. Every target serves the
// 2025-11-25 handshake, and with it a Streamable HTTP session is a real
// server-side session; mcp-go's default (2026-07-28) has none, and the npm
// peers would be measured in another mode than toolgate.
const protocolVersion = "2025-11-25"

// setupTimeout bounds opening and initialising one session.
const setupTimeout = 60 * time.Second

// call is one client session making the measured call: tool with
// {"message": "ping <seq>"}. The answer must carry the message back, so a
// gateway that answered without reaching the upstream would show as errors.
type call struct {
	c    *client.Client
	tool string
}

var _ load.Session = call{}

func (s call) Call(ctx context.Context, seq int64) error {
	msg := "ping " + strconv.FormatInt(seq, 10)
	req := mcp.CallToolRequest{}
	req.Params.Name = s.tool
	req.Params.Arguments = map[string]any{"message": msg}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	text := textOf(res)
	if res.IsError {
		return fmt.Errorf("tool error: %.200s", text)
	}
	if !strings.Contains(text, msg) {
		return fmt.Errorf("answer %.200q lacks %q", text, msg)
	}
	return nil
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// initialize runs the MCP handshake on a started client.
func initialize(ctx context.Context, c *client.Client) error {
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-loadbench", Version: "1"}
	_, err := c.Initialize(ctx, req)
	return err
}

// httpClient is one target's HTTP client, shared by all its sessions: one
// idle connection per worker, so no call waits for a connection.
func httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
	}}
}

// openHTTP opens and initialises one Streamable HTTP session.
func openHTTP(ctx context.Context, hc *http.Client, url string, headers map[string]string) (*client.Client, error) {
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(hc)}
	if len(headers) > 0 {
		opts = append(opts, transport.WithHTTPHeaders(headers))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	if err := initialize(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// setupParallel is how many sessions open at once: a peer that starts an
// upstream process per session would otherwise fork dozens at a time.
const setupParallel = 8

// openHTTPSessions opens n sessions, setupParallel at a time. On failure
// the ones opened are closed again.
func openHTTPSessions(ctx context.Context, n int, hc *http.Client, url string, headers map[string]string) ([]*client.Client, error) {
	clients := make([]*client.Client, n)
	errs := make([]error, n)
	sem := make(chan struct{}, setupParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			clients[i], errs[i] = openHTTP(ctx, hc, url, headers)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("open session: %w", err)
		}
	}
	return clients, nil
}

// closeAll ends the sessions (DELETE over Streamable HTTP), in parallel.
func closeAll(clients []*client.Client) {
	closeParallel(clients, func(c *client.Client) { _ = c.Close() })
}

// closeParallel closes each session that was opened (not nil),
// setupParallel at a time.
func closeParallel[S comparable](sessions []S, closeOne func(S)) {
	var none S
	sem := make(chan struct{}, setupParallel)
	var wg sync.WaitGroup
	for _, s := range sessions {
		if s == none {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			closeOne(s)
		})
	}
	wg.Wait()
}
