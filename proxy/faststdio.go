package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/pipeline"
)

// stdioFast is the stdio client's fast path, the counterpart of fastCalls
// for Streamable HTTP: it reads the client's lines itself, answers a plain
// tools/call (the same allow-list, decodeFast) through the chain, and
// hands every other line to mcp-go's stdio server unchanged, through a
// pipe.
//
// mcp-go's stdio server decodes each line about seven times (its own
// parse, three checks for a response to a request of its own, the method,
// HandleMessage's, the call's params, and toolgate's refuseStaleState
// hook): callgrind counted encoding/json at 37% of the gateway's
// instructions per call over stdio (bench/README.md, "Against a zero-check
// relay (issue 22)"). Here the line is decoded once.
//
// What a fast call shares with mcp-go's handling of the same line: the
// context (mcp-go's stdio session, the subject, taken from the stdio
// server's context function), so relays to the client (sampling,
// elicitation, roots), log messages and progress go through mcp-go's
// session as they do for a call mcp-go serves; the answer's bytes
// (encodeAnswer, json.Marshal of mcp-go's response, and a newline); the
// end of the session, which cancels calls in flight as mcp-go cancels its
// workers' when its input ends. Every write to out, mcp-go's and the fast
// path's, is one Write under one lock (lockedWriter), so lines never
// interleave.
//
// A call is taken only once mcp-go has seen notifications/initialized
// (before that, mcp-go serves it as it always did), and only while fewer
// than stdioWorkers fast calls run: past that, the line goes to mcp-go,
// whose queue holds it, so the reader never stops reading the client's
// answers to a running call's requests. A notifications/cancelled naming a
// fast call cancels it, and still goes to mcp-go.
type stdioFast struct {
	srv  *Server
	out  *lockedWriter
	base chan context.Context // mcp-go's context for the session, once it has made it
	work chan *stdioJob       // to an idle worker; never buffered

	mu       sync.Mutex
	ctx      context.Context      // nil until base delivers it
	closing  bool                 // no call is taken any more
	workers  int                  // started, at most stdioWorkers
	running  sync.WaitGroup       // calls taken and not answered, and workers
	inflight map[string]*stdioJob // by the request id's JSON
}

// stdioJob is a call taken, for a worker.
type stdioJob struct {
	ctx    context.Context
	cancel context.CancelFunc
	req    fastRequest
}

// lockedWriter makes each Write one line on out, whoever writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serveStdioFast serves the client as ServeStdio does, with the fast path
// in front of mcp-go's stdio server.
func (s *Server) serveStdioFast(ctx context.Context, stdio *server.StdioServer, in io.Reader, out io.Writer) error {
	f := &stdioFast{srv: s, out: &lockedWriter{w: out}, base: make(chan context.Context, 1),
		work: make(chan *stdioJob), inflight: map[string]*stdioJob{}}
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		f.base <- ctx // holds mcp-go's session; the subject is already on ctx (ServeStdio)
		return ctx
	})
	toMCPGo, fromReader := io.Pipe()
	go f.read(in, fromReader)
	err := stdio.Listen(ctx, toMCPGo, f.out)
	_ = toMCPGo.CloseWithError(io.ErrClosedPipe) // a reader still blocked on the pipe stops
	f.close()
	return err
}

// read splits the client's input into lines: fast calls it runs, the rest
// it writes to mcp-go. At the end of the input, mcp-go's input ends too.
func (f *stdioFast) read(in io.Reader, toMCPGo *io.PipeWriter) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && !f.take(line) {
			if _, werr := toMCPGo.Write(line); werr != nil {
				return // mcp-go stopped listening
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			_ = toMCPGo.CloseWithError(err) // nil: mcp-go sees io.EOF, as it would have
			return
		}
	}
}

// take runs line as a fast call, or reports false: the line is mcp-go's.
func (f *stdioFast) take(line []byte) bool {
	ctx := f.session()
	if ctx == nil {
		return false
	}
	req, ok := decodeFast(bytes.TrimRight(line, " \t\r\n"))
	if !ok {
		f.aside(line)
		return false
	}
	if req.Name == discovery.SearchTool { // answered by its own handler (discovery.go), not the chain
		return false
	}
	if session := server.ClientSessionFromContext(ctx); session == nil || !session.Initialized() {
		return false
	}
	return f.hand(ctx, req)
}

// hand gives a call to an idle worker, or to a new one while fewer than
// stdioWorkers run, and reports false when all are busy: the line is then
// mcp-go's, whose queue holds it.
//
// Workers outlive their calls so that a call runs on a goroutine whose
// stack has already grown to the chain's depth: a goroutine per call
// started at 8 KiB and grew it on every call, which callgrind counted at a
// third of the fast path's instructions per call (stack copying).
func (f *stdioFast) hand(ctx context.Context, req fastRequest) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	job := &stdioJob{req: req}
	job.ctx, job.cancel = context.WithCancel(ctx)
	select {
	case f.work <- job: // an idle worker was waiting; under f.mu, so close cannot have closed work
	default:
		if f.workers == stdioWorkers {
			job.cancel()
			return false
		}
		f.workers++
		f.running.Add(1)
		go f.worker(job)
	}
	f.inflight[string(req.ID)] = job // a client reusing an id in flight can cancel only the later call, as with mcp-go
	f.running.Add(1)
	f.srv.stdioTaken.Add(1)
	return true
}

// worker serves calls until the session ends.
func (f *stdioFast) worker(job *stdioJob) {
	defer f.running.Done()
	for ok := true; ok; job, ok = <-f.work {
		f.serve(job)
	}
}

// session is mcp-go's context for the session once Listen has made it,
// nil before (and after close).
func (f *stdioFast) session() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil && !f.closing {
		select {
		case f.ctx = <-f.base:
		default:
		}
	}
	if f.closing {
		return nil
	}
	return f.ctx
}

// serve runs one call through the chain, as Server.handle does for a call
// mcp-go serves, and writes its answer.
func (f *stdioFast) serve(job *stdioJob) {
	ctx, req := job.ctx, &job.req
	defer func() {
		job.cancel()
		f.mu.Lock()
		if f.inflight[string(req.ID)] == job {
			delete(f.inflight, string(req.ID))
		}
		f.mu.Unlock()
		f.running.Done()
	}()
	params := req.params()
	caps := f.srv.callerCaps(ctx, params.Meta)
	ctx = f.srv.withClientRelay(pipeline.WithInteraction(ctx), caps)
	res, err := f.srv.runFast(ctx, f.srv.callFrom(ctx, &params))
	answer, encErr := encodeAnswer(req.ID, res, err)
	if encErr != nil {
		f.srv.log.Error("stdio answer not encoded", "tool", req.Name, "err", encErr)
		return
	}
	_, _ = f.out.Write(append(answer, '\n'))
}

// aside cancels the fast call a client's notifications/cancelled names.
// It decodes a line mcp-go gets as mcp-go does (encoding/json: a method
// spelled with escapes is still the method); such lines are rare.
func (f *stdioFast) aside(line []byte) {
	var msg sideMessage
	if json.Unmarshal(line, &msg) != nil || msg.Method != string(mcp.MethodNotificationCancelled) || msg.Params == nil {
		return
	}
	f.mu.Lock()
	job := f.inflight[string(msg.Params.RequestID)]
	f.mu.Unlock()
	if job != nil {
		job.cancel()
	}
}

// close takes no more calls, cancels those in flight (mcp-go has ended
// its session) and waits for them, so nothing is written to out after
// ServeStdio returns.
func (f *stdioFast) close() {
	f.mu.Lock()
	f.closing = true
	close(f.work) // idle workers end
	for _, job := range f.inflight {
		job.cancel()
	}
	f.mu.Unlock()
	f.running.Wait()
}
