package targets

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bench/procstat"
)

// pipeConn is the lean client's one session with a stdio MCP server (see
// lean_wire.go for why it exists): line-delimited JSON-RPC on the
// server's stdin and stdout. All workers share it, their calls in flight
// at once: writes are serialised, and one reader goroutine hands each
// answer to the caller waiting for its id.
type pipeConn struct {
	wmu sync.Mutex
	w   io.WriteCloser

	next atomic.Int64 // the last request id used

	mu      sync.Mutex
	waiting map[int64]chan *reply
	err     error         // why the reader stopped; set before done is closed
	done    chan struct{} // closed when the reader stops
}

// newPipeConn starts the reader on r (the server's stdout); w is its stdin.
func newPipeConn(r io.ReadCloser, w io.WriteCloser) *pipeConn {
	c := &pipeConn{w: w, waiting: map[int64]chan *reply{}, done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *pipeConn) read(r io.ReadCloser) {
	br := bufio.NewReaderSize(r, 64*1024)
	var line []byte
	var err error
	for err == nil {
		line, err = readMessage(br, line[:0])
		if len(line) > 0 {
			c.dispatch(line)
		}
	}
	r.Close()
	if err == io.EOF {
		err = errors.New("the server closed its stdout")
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// readMessage appends one line to buf, however long, without its ending.
func readMessage(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			for len(buf) > 0 && (buf[len(buf)-1] == '\n' || buf[len(buf)-1] == '\r') {
				buf = buf[:len(buf)-1]
			}
			return buf, err
		}
	}
}

// dispatch hands an answer to its caller; a server's request gets a
// minimal answer, a notification or a line that is not JSON-RPC is
// ignored, and so is the late answer of a call that gave up.
func (c *pipeConn) dispatch(line []byte) {
	r := new(reply)
	if json.Unmarshal(line, r) != nil {
		return
	}
	if r.request() {
		go c.answerServer(r) // never block the reader on a write
		return
	}
	id, ok := parseID(r.ID)
	if r.Method != "" || !ok {
		return
	}
	c.mu.Lock()
	ch := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- r // buffered
	}
}

// answerServer answers ping as the protocol asks, and every other request
// with "method not found": the session declared no capabilities.
func (c *pipeConn) answerServer(r *reply) {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), r.ID...)
	if r.Method == "ping" {
		b = append(b, `,"result":{}}`...)
	} else {
		b = append(b, `,"error":{"code":-32601,"message":"method not found"}}`...)
	}
	_ = c.write(append(b, '\n'))
}

func (c *pipeConn) write(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(line)
	return err
}

// roundTrip sends request id (line, newline included) and waits for its
// answer.
func (c *pipeConn) roundTrip(ctx context.Context, id int64, line []byte) (*reply, error) {
	ch := make(chan *reply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.waiting[id] = ch
	c.mu.Unlock()
	if err := c.write(line); err != nil {
		c.forget(id)
		return nil, fmt.Errorf("write to the server: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		c.forget(id)
		select {
		case r := <-ch: // answered just before the end
			return r, nil
		default:
			return nil, c.err
		}
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

func (c *pipeConn) forget(id int64) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// initialize runs the handshake: initialize, then notifications/initialized.
func (c *pipeConn) initialize(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	id := c.next.Add(1)
	r, err := c.roundTrip(ctx, id, append(initializeBody(id), '\n'))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := checkInitialize(r, id); err != nil {
		return err
	}
	return c.write([]byte(initializedBody + "\n"))
}

// close closes the server's stdin (a stdio server ends on EOF).
func (c *pipeConn) close() error { return c.w.Close() }

// leanStdio is one worker's view of the shared pipeConn.
type leanStdio struct {
	c    *pipeConn
	tool []byte // JSON string
}

var _ load.Session = leanStdio{}

// Call makes the measured call and checks its answer.
func (s leanStdio) Call(ctx context.Context, seq int64) error {
	id := s.c.next.Add(1)
	msg := message(seq)
	line := append(appendCall(make([]byte, 0, 128), id, s.tool, msg), '\n')
	r, err := s.c.roundTrip(ctx, id, line)
	if err != nil {
		return err
	}
	return checkCall(r, id, msg)
}

// pipeTarget is a stdio target measured with the lean client: the process
// the harness started, and the one session on its pipes.
type pipeTarget struct {
	name    string
	proc    *process
	conn    *pipeConn
	tool    []byte
	gateway bool // the process is a gateway, its children the upstream
}

// startLeanStdio spawns command as an MCP server over stdio and opens the
// session.
func startLeanStdio(ctx context.Context, name, command string, args []string, env map[string]string, tool string, gateway bool) (Target, error) {
	p, stdin, stdout, err := startPiped(command, args, env)
	if err != nil {
		return nil, err
	}
	t := &pipeTarget{name: name, proc: p, conn: newPipeConn(stdout, stdin), tool: toolJSON(tool), gateway: gateway}
	if err := t.conn.initialize(ctx); err != nil {
		_ = t.Close()
		return nil, &wrapped{err, "last output:\n" + p.lastOutput()}
	}
	return t, nil
}

func (t *pipeTarget) Name() string { return t.name }

func (t *pipeTarget) Open(_ context.Context, n int) ([]load.Session, func(), error) {
	sessions := make([]load.Session, n)
	for i := range sessions {
		sessions[i] = leanStdio{c: t.conn, tool: t.tool}
	}
	return sessions, func() {}, nil
}

func (t *pipeTarget) Gateway() int {
	if t.gateway {
		return t.proc.pid()
	}
	return 0
}

func (t *pipeTarget) Upstreams() []int {
	pids := procstat.Descendants(t.proc.pid())
	if t.gateway {
		return pids
	}
	return append([]int{t.proc.pid()}, pids...)
}

// stdinGrace is how long a stdio server gets to end by itself on EOF.
const stdinGrace = 2 * time.Second

// Close closes the server's stdin, gives it stdinGrace to end, then stops
// what is left as any other process, and waits for the reader.
func (t *pipeTarget) Close() error {
	_ = t.conn.close()
	timer := time.NewTimer(stdinGrace)
	defer timer.Stop()
	select {
	case <-t.proc.done:
	case <-timer.C:
	}
	err := t.proc.stop(stopGrace)
	<-t.conn.done
	return err
}
