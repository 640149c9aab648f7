package targets

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/bench/echo"
)

// pipes connects a lean client to a server in the same process: the
// client's conn, and the server's stdin and stdout.
func pipes() (*pipeConn, io.ReadCloser, io.WriteCloser) {
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	return newPipeConn(clientIn, clientOut), toServer, fromServer
}

// TestLeanStdioEcho runs the lean client against the harness's own echo
// server (bench/echo, mcp-go's stdio server) in this process, several
// workers sharing the one session with their calls in flight at once, as
// the harness's stdio targets do. A call to a tool that does not exist
// must fail.
func TestLeanStdioEcho(t *testing.T) {
	conn, stdin, stdout := pipes()
	stdio := server.NewStdioServer(echo.New("echo", 0))
	server.WithWorkerPoolSize(16)(stdio) // answers may overtake each other
	served := make(chan error, 1)
	go func() {
		served <- stdio.Listen(context.Background(), stdin, stdout)
		stdout.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.initialize(ctx); err != nil {
		t.Fatal(err)
	}
	const workers, calls = 8, 50
	errs := make(chan error, workers*calls)
	var wg sync.WaitGroup
	for w := range workers {
		s := leanStdio{c: conn, tool: toolJSON(echo.Tool)}
		wg.Go(func() {
			for i := range calls {
				errs <- s.Call(ctx, int64(w*calls+i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := (leanStdio{c: conn, tool: toolJSON("nope")}).Call(ctx, 1); err == nil {
		t.Error("a call to an unknown tool succeeded")
	}
	conn.close()
	if err := <-served; err != nil {
		t.Errorf("server: %v", err)
	}
	<-conn.done
}

// peer is the server side of a scripted exchange.
type peer struct {
	t   *testing.T
	in  *bufio.Scanner
	out io.WriteCloser
}

// read reads the client's next message.
func (p *peer) read() map[string]any {
	if !p.in.Scan() {
		p.t.Errorf("the client sent nothing more: %v", p.in.Err())
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(p.in.Bytes(), &m); err != nil {
		p.t.Errorf("client sent %q: %v", p.in.Bytes(), err)
	}
	return m
}

func (p *peer) write(format string, args ...any) {
	if _, err := fmt.Fprintf(p.out, format+"\n", args...); err != nil {
		p.t.Errorf("write: %v", err)
	}
}

// handshake answers initialize and reads notifications/initialized.
func (p *peer) handshake() {
	init := p.read()
	p.write(`{"jsonrpc":"2.0","id":%v,"result":{"protocolVersion":%q,"capabilities":{}}}`, init["id"], protocolVersion)
	if m := p.read(); m["method"] != "notifications/initialized" {
		p.t.Errorf("after initialize the client sent %v", m)
	}
}

// callID reads a tools/call and returns its id and message.
func (p *peer) callID() (any, string) {
	m := p.read()
	params, _ := m["params"].(map[string]any)
	args, _ := params["arguments"].(map[string]any)
	msg, _ := args["message"].(string)
	return m["id"], msg
}

// TestLeanStdioScripted runs the lean client against scripted servers: one
// that sends a notification, a ping, another request and a stray answer
// before answering the call, and one that goes away during a call.
func TestLeanStdioScripted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  func(p *peer)
		wantErr string
	}{
		{"server requests", func(p *peer) {
			id, msg := p.callID()
			p.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
			p.write(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`)
			p.write(`{"jsonrpc":"2.0","id":%v,"method":"sampling/createMessage","params":{}}`, id) // the call's id, but a request
			answers := map[string]string{}
			for range 2 {
				m := p.read()
				raw, _ := json.Marshal(m)
				answers[fmt.Sprint(m["id"])] = string(raw)
			}
			if got := answers["srv-1"]; got != `{"id":"srv-1","jsonrpc":"2.0","result":{}}` {
				p.t.Errorf("ping answered %s", got)
			}
			if got := answers[fmt.Sprint(id)]; !strings.Contains(got, `"code":-32601`) {
				p.t.Errorf("sampling request answered %s", got)
			}
			p.write(`{"jsonrpc":"2.0","id":999,"result":{"content":[{"type":"text","text":"stray"}]}}`)
			p.write(`{"jsonrpc":"2.0","id":%v,"result":{"content":[{"type":"text","text":%q}]}}`, id, msg)
		}, ""},
		{"server gone", func(p *peer) {
			p.callID()
			p.out.Close()
		}, "closed its stdout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, stdin, stdout := pipes()
			p := &peer{t: t, in: bufio.NewScanner(stdin), out: stdout}
			scripted := make(chan struct{})
			go func() {
				defer close(scripted)
				p.handshake()
				tc.script(p)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := conn.initialize(ctx); err != nil {
				t.Fatal(err)
			}
			err := leanStdio{c: conn, tool: toolJSON("echo")}.Call(ctx, 7)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("call: %v, want error %q", err, tc.wantErr)
			}
			conn.close() // a script still reading fails rather than hangs
			<-scripted
			stdout.Close()
			<-conn.done
		})
	}
}
