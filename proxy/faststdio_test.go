package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/upstreams"
)

// mcp-go's stdio server keeps its one session in a package variable, so
// these tests never run two stdio sessions at once (no t.Parallel).

// stdioServer is a Server over the differential test's catalog, with the
// stdio fast path on or off.
func stdioServer(tb testing.TB, calls Calls, fast bool) *Server {
	tb.Helper()
	servers := []upstreams.Server{{Name: "hostile", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "hostile__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
		MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan}}
	var listed []upstreams.Listed
	for _, name := range []string{"echo", "fail", "good_output", "meta", "progress", "block"} {
		listed = append(listed, upstreams.Listed{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	cat, err := upstreams.Build(servers, map[string][]upstreams.Listed{"hostile": listed}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return NewServer(Options{Calls: calls, Catalog: func() *upstreams.Catalog { return cat }, Policy: func() Policy { return allowAll{} },
		NoStdioFastPath: !fast}, "test", slog.New(slog.DiscardHandler))
}

// stdioSession is a client of ServeStdio, initialised.
type stdioSession struct {
	tb   testing.TB
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func openStdio(tb testing.TB, srv *Server) *stdioSession {
	tb.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{tb: tb, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := srv.ServeStdio(context.Background(), authz.Subject{Principal: "alice"}, inR, outW)
		_ = outW.Close()
		s.done <- err
	}()
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	s.answer(`0`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// mcp-go handles a notification before it reads the next line: once
	// the ping is answered, the session is initialised.
	s.send(`{"jsonrpc":"2.0","id":"sync","method":"ping"}`)
	s.answer(`"sync"`)
	return s
}

func (s *stdioSession) send(line string) {
	s.tb.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.tb.Fatal(err)
	}
}

// answer reads lines until the response to id (compact JSON), skipping
// notifications, and returns it.
func (s *stdioSession) answer(id string) string {
	s.tb.Helper()
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			s.tb.Fatalf("waiting for the answer to %s: %v", id, err)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Method == "" && compactJSON(msg.ID) == id {
			return line
		}
	}
}

// close ends the input and waits for ServeStdio, reading what is left.
func (s *stdioSession) close() {
	s.tb.Helper()
	_ = s.in.Close()
	_, _ = io.Copy(io.Discard, s.out)
	if err := <-s.done; err != nil {
		s.tb.Fatalf("ServeStdio: %v", err)
	}
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// TestStdioFastPathMatchesMCPGo sends every tools/call of the HTTP fast
// path's seeds over stdio, with the fast path and without it, and wants
// the same answer, byte for byte, and the same Call in the chain; the
// seeds the HTTP fast path takes are the ones the stdio fast path takes.
func TestStdioFastPathMatchesMCPGo(t *testing.T) {
	fastEcho, slowEcho := &callEcho{}, &callEcho{}
	fast, slow := stdioServer(t, fastEcho, true), stdioServer(t, slowEcho, false)
	tried := 0
	for _, seed := range fastSeeds {
		id, ok := stdioSeed(seed.body, seed.variant)
		if !ok {
			continue
		}
		tried++
		line := strings.TrimRight(seed.body, "\n")
		taken := fast.stdioTaken.Load()
		gotAnswer, gotCalls := oneStdioCall(t, fast, fastEcho, line, id)
		if took := fast.stdioTaken.Load() > taken; took != seed.taken {
			t.Errorf("%s: taken %t, want %t", line, took, seed.taken)
		}
		wantAnswer, wantCalls := oneStdioCall(t, slow, slowEcho, line, id)
		if gotAnswer != wantAnswer {
			t.Errorf("%s:\nfast path: %s\nmcp-go:    %s", line, gotAnswer, wantAnswer)
		}
		if !sameCalls(gotCalls, wantCalls) {
			t.Errorf("%s: the chain got\n%+v\nthrough the fast path, and\n%+v\nthrough mcp-go", line, gotCalls, wantCalls)
		}
	}
	if tried < 40 {
		t.Fatalf("only %d seeds are stdio tools/calls", tried)
	}
}

// stdioSeed reports whether body is a one-line tools/call that a client
// gets an answer to, with an id of its own, and that id.
func stdioSeed(body string, v fastVariant) (string, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	line := strings.TrimRight(body, "\n")
	if v != usualRequest || strings.Contains(line, "\n") || json.Unmarshal([]byte(line), &msg) != nil ||
		msg.Method != "tools/call" || msg.Result != nil || !plainID(msg.ID) {
		return "", false
	}
	return compactJSON(msg.ID), true
}

func oneStdioCall(t *testing.T, srv *Server, echo *callEcho, line, id string) (string, []Call) {
	t.Helper()
	s := openStdio(t, srv)
	defer s.close()
	echo.take()
	s.send(line)
	return s.answer(id), echo.take()
}

// blockingChain holds hostile__block until its call is cancelled, and
// answers the rest as callEcho does.
type blockingChain struct {
	callEcho
	started chan struct{}
}

func (b *blockingChain) Handle(ctx context.Context, call Call) *mcp.CallToolResult {
	if call.Name != "hostile__block" {
		return b.callEcho.Handle(ctx, call)
	}
	b.started <- struct{}{}
	<-ctx.Done()
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("cancelled")}, IsError: true,
		StructuredContent: json.RawMessage(`{"ok":false}`)}
}

// TestStdioFastCallCancelled: a client's notifications/cancelled ends the
// fast call it names, and other calls go on.
func TestStdioFastCallCancelled(t *testing.T) {
	chain := &blockingChain{started: make(chan struct{}, 1)}
	srv := stdioServer(t, chain, true)
	s := openStdio(t, srv)
	defer s.close()
	s.send(toolsCallBody(`7`, `{"name":"hostile__block"}`))
	<-chain.started
	s.send(toolsCallBody(`8`, `{"name":"hostile__echo","arguments":{"x":1}}`))
	if got := s.answer(`8`); !strings.Contains(got, `"text":"{\"x\":1}"`) {
		t.Fatalf("a call beside a held one: %s", got)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	if got := s.answer(`7`); !strings.Contains(got, `"text":"cancelled"`) {
		t.Fatalf("the cancelled call: %s", got)
	}
	if n := srv.stdioTaken.Load(); n != 2 {
		t.Fatalf("fast calls: %d, want 2", n)
	}
}

// TestStdioEndCancelsFastCalls: when the client's input ends, a fast call
// still running is cancelled, and ServeStdio returns only after it ended
// (nothing is written after), as mcp-go cancels its own workers' calls.
func TestStdioEndCancelsFastCalls(t *testing.T) {
	chain := &blockingChain{started: make(chan struct{}, 1)}
	srv := stdioServer(t, chain, true)
	s := openStdio(t, srv)
	s.send(toolsCallBody(`7`, `{"name":"hostile__block"}`))
	<-chain.started
	s.close() // returns once ServeStdio has: the held call was cancelled
	if n := srv.stdioTaken.Load(); n != 1 {
		t.Fatalf("fast calls: %d, want 1", n)
	}
}

// TestStdioBusyWorkersLeaveCallsToMCPGo: while stdioWorkers fast calls
// run, the next call goes to mcp-go, which answers it; the reader never
// waits for a worker.
func TestStdioBusyWorkersLeaveCallsToMCPGo(t *testing.T) {
	chain := &blockingChain{started: make(chan struct{}, stdioWorkers)}
	srv := stdioServer(t, chain, true)
	s := openStdio(t, srv)
	for i := range stdioWorkers {
		s.send(toolsCallBody(strconv.Itoa(100+i), `{"name":"hostile__block"}`))
	}
	for range stdioWorkers {
		<-chain.started
	}
	s.send(toolsCallBody(`8`, `{"name":"hostile__echo","arguments":{"x":1}}`))
	if got := s.answer(`8`); !strings.Contains(got, `"text":"{\"x\":1}"`) {
		t.Fatalf("a call while every worker is busy: %s", got)
	}
	if n := srv.stdioTaken.Load(); n != stdioWorkers {
		t.Fatalf("fast calls: %d, want %d", n, stdioWorkers)
	}
	s.close() // cancels the held calls
}

// BenchmarkStdioCall is one tools/call over stdio, answered by a chain
// that echoes at once, through the fast path and through mcp-go's stdio
// server:
//
//	go test ./proxy -run XXX -bench StdioCall -benchmem
func BenchmarkStdioCall(b *testing.B) {
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "mcp-go"
		}
		b.Run(name, func(b *testing.B) {
			echo := &callEcho{}
			s := openStdio(b, stdioServer(b, echo, fast))
			defer s.close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				id := strconv.Itoa(i)
				s.send(toolsCallBody(id, `{"name":"hostile__echo","arguments":{"message":"ping `+id+`"}}`))
				s.answer(id)
				echo.take()
			}
		})
	}
}
