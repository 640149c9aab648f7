package conformanceserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestMainUsage(t *testing.T) {
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-bogus"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"-http", "256.0.0.1:1"}, 1},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr strings.Builder
			if got := run(t.Context(), tc.args, strings.NewReader(""), io.Discard, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
		})
	}
}

// TestMainStdio serves over pipes as the process would over stdin/stdout, and ends at stdin EOF.
// Sampling goes through too: over stdio the server can always reach the client.
func TestMainStdio(t *testing.T) {
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	var stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		code := run(context.Background(), nil, serverIn, serverOut, &stderr)
		_ = serverOut.Close() // ends the client's read loop
		exited <- code
	}()

	llm := &fakeLLM{}
	c := client.NewClient(transport.NewIO(clientIn, clientOut, nil), client.WithSamplingHandler(llm),
		client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "stdio-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := onlyText(t, callTool(t, c, "test_sampling", map[string]any{"prompt": "over stdio"})); got != "LLM response: sampled answer" {
		t.Errorf("test_sampling = %q", got)
	}
	if err := c.Close(); err != nil { // closes the server's stdin
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit %d; stderr: %s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("server did not stop at stdin EOF")
	}
}

// TestMainHTTP: -http announces its URL on stdout, serves there, and stops on its context.
func TestMainHTTP(t *testing.T) {
	stdoutR, stdoutW := io.Pipe()
	ctx, stop := context.WithCancel(t.Context())
	var stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"-http", "127.0.0.1:0"}, nil, stdoutW, &stderr)
		_ = stdoutW.Close()
		exited <- code
	}()

	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTENING ")
	if !ok || !strings.HasSuffix(endpoint, endpointPath) {
		t.Fatalf("stdout line %q", line)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	tr, err := transport.NewStreamableHTTP(endpoint, transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	c := initialized(t, client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)))
	if got := onlyText(t, callTool(t, c, "test_simple_text", nil)); got != simpleText {
		t.Errorf("test_simple_text = %q", got)
	}
	_ = c.Close()

	stop()
	if rest, _ := io.ReadAll(stdoutR); len(rest) != 0 { // read until run closes it
		t.Errorf("more on stdout: %q", rest)
	}
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "serving Streamable HTTP") {
		t.Errorf("stderr lacks the start log: %s", stderr.String())
	}
}

// syncBuffer is a strings.Builder safe for the server's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMainStdioOrdersNotifications: over stdio too, a call's progress comes before its answer,
// every time (mcp-go writes notifications from another goroutine than the answer).
func TestMainStdioOrdersNotifications(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		run(context.Background(), nil, inR, outW, io.Discard)
		_ = outW.Close()
	}()
	defer inW.Close()
	lines := bufio.NewScanner(outR)
	send := func(msg string) { _, _ = io.WriteString(inW, msg+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	lines.Scan()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range 50 {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":%d}}}`, 10+i, i))
		for n := range 4 {
			if !lines.Scan() {
				t.Fatal("stdout ended")
			}
			isResult := strings.Contains(lines.Text(), `"result"`)
			if isResult != (n == 3) {
				t.Fatalf("call %d, line %d: %s", i, n, lines.Text())
			}
		}
	}
}
