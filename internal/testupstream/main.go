package testupstream

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/mark3labs/mcp-go/server"
)

// Main runs the upstream as a process on os.Stdin/os.Stdout/os.Stderr and returns the exit code.
// It ends on SIGTERM/SIGINT or stdin EOF. Flags (args excludes the program name):
//
//	-transport stdio|http|sse  how to serve (default stdio)
//	-addr HOST:PORT            listen address for http/sse (default 127.0.0.1:0)
//	-name NAME                 server name reported in initialize (default testupstream)
//	-hostile-schemas           also register remote_ref, file_ref, self_ref, deep_allof
//	-nested                    also register deploy (echo with parameters nested in objects)
//	-extra-tools N             register extra_0 .. extra_{N-1}
//	-page-size N               tools/list page size (0: no pagination)
//	-stderr-line TEXT          write TEXT and a newline to stderr first thing
//	-exit-at-start CODE        exit with CODE right after -stderr-line, before reading anything
//	-hang-init                 stdio: read stdin and never answer; http/sse: accept requests and never answer
//	-crash-after N             exit with CrashAfterCode right after answering the Nth tool call
//	-fail-once PATH            if PATH does not exist: create it and exit 3 at startup (after
//	                           -stderr-line); if it exists, run normally. The first run of a restarted
//	                           upstream fails, the next one comes up.
//	-fault-rate F              add the tool flaky (echo) and inject a fault into a fraction F (0..1)
//	                           of its calls (see Faults); off at 0
//	-fault-seed N              seed of the fault draws (default 1); over stdio the pid is mixed in,
//	                           so a child restarted after a crash does not repeat its predecessor
//	-faults LIST               the faults drawn from, comma-separated: crash, hang, garbage, 429
//	                           (HTTP only); default all the transport supports
//	-fault-log PATH            append one line per injected fault to PATH
//
// Over stdio nothing but JSON-RPC is written to stdout. Over http/sse exactly one line is written to
// stdout, "LISTENING <url>" (http://HOST:PORT/mcp or http://HOST:PORT/sse), once the port accepts
// connections; the upstream then serves until a signal or stdin EOF, so a parent must keep the
// child's stdin open (exec.Cmd's default nil Stdin is /dev/null: immediate EOF, immediate exit).
// Diagnostics go to stderr. Bad flags exit 2; a listen or serve failure exits 1.
//
// To run it from a test binary, re-exec the binary with a marker in the environment and have
// TestMain divert to Main:
//
//	func TestMain(m *testing.M) {
//		if os.Getenv("TOOLGATE_TESTUPSTREAM") == "1" {
//			os.Exit(testupstream.Main(os.Args[1:]))
//		}
//		os.Exit(m.Run())
//	}
//
// then start os.Args[0] with TOOLGATE_TESTUPSTREAM=1 and the flags above as its arguments.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// MainIO is Main on the given streams and without signal handling: it ends on stdin EOF (a nil
// stdin never ends an http/sse upstream). The crash tool still exits the process. mcp-go keeps one
// process-wide stdio session, so run at most one stdio MainIO per process at a time.
func MainIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(context.Background(), args, stdin, stdout, stderr)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	transport := fs.String("transport", "stdio", "`transport`: stdio, http (Streamable HTTP at /mcp) or sse (legacy HTTP+SSE at /sse)")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address` for http and sse")
	name := fs.String("name", "testupstream", "server `name` reported in initialize")
	hostile := fs.Bool("hostile-schemas", false, "also register tools with hostile input schemas")
	nested := fs.Bool("nested", false, "also register deploy, whose parameters nest in objects")
	extra := fs.Int("extra-tools", 0, "register `N` extra tools extra_0..extra_{N-1}")
	pageSize := fs.Int("page-size", 0, "tools/list page `size` (0: no pagination)")
	stderrLine := fs.String("stderr-line", "", "write this `line` to stderr at startup")
	exitAtStart := fs.Int("exit-at-start", 0, "exit with this `code` at startup, before reading anything")
	hang := fs.Bool("hang-init", false, "read requests but never answer any")
	crashAfter := fs.Int("crash-after", 0, "exit right after answering `N` tool calls (0: never)")
	failOnce := fs.String("fail-once", "", "exit 3 at startup unless this marker `file` exists (creating it)")
	faultRate := fs.Float64("fault-rate", 0, "inject a fault into this `fraction` of the tool flaky's calls (0: no flaky tool)")
	faultSeed := fs.Uint64("fault-seed", 1, "`seed` of the fault draws")
	faultList := fs.String("faults", "", "comma-separated `faults` to draw from: crash, hang, garbage, 429 (default: all the transport supports)")
	faultLog := fs.String("fault-log", "", "append one line per injected fault to this `file`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	exitSet := false
	fs.Visit(func(f *flag.Flag) { exitSet = exitSet || f.Name == "exit-at-start" })
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "testupstream: unexpected arguments %q\n", fs.Args())
		return 2
	case *transport != "stdio" && *transport != "http" && *transport != "sse":
		fmt.Fprintf(stderr, "testupstream: -transport %q: want stdio, http or sse\n", *transport)
		return 2
	case *extra < 0 || *pageSize < 0 || *crashAfter < 0:
		fmt.Fprintln(stderr, "testupstream: -extra-tools, -page-size and -crash-after must be >= 0")
		return 2
	case *faultRate < 0 || *faultRate > 1:
		fmt.Fprintln(stderr, "testupstream: -fault-rate must be in [0, 1]")
		return 2
	}
	var faults *Faults
	if *faultRate > 0 {
		kinds, err := ParseFaults(*faultList, *transport)
		if err != nil {
			fmt.Fprintf(stderr, "testupstream: -faults: %v\n", err)
			return 2
		}
		seed := *faultSeed
		if *transport == "stdio" {
			// A restarted child (after a crash) must not repeat its predecessor's draws.
			seed ^= uint64(os.Getpid()) << 32
		}
		faults = &Faults{Rate: *faultRate, Seed: seed, Kinds: kinds}
		if *faultLog != "" {
			f, err := os.OpenFile(*faultLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				fmt.Fprintf(stderr, "testupstream: %v\n", err)
				return 1
			}
			defer f.Close()
			faults.Log = f
		}
	}

	if *stderrLine != "" {
		fmt.Fprintln(stderr, *stderrLine)
	}
	if exitSet {
		return *exitAtStart
	}
	if *failOnce != "" {
		f, err := os.OpenFile(*failOnce, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = f.Close()
			fmt.Fprintf(stderr, "testupstream: first run (created %s), failing\n", *failOnce)
			return 3
		}
	}

	o := Options{Name: *name, HostileSchemas: *hostile, Nested: *nested, ExtraTools: *extra, PageSize: *pageSize, CrashAfter: *crashAfter, Faults: faults}
	o.rt = newRuntime(func(code int) {
		fmt.Fprintf(stderr, "testupstream: answered %d calls, exiting with %d\n", *crashAfter, code)
		os.Exit(code)
	}, *crashAfter)
	if *transport == "stdio" {
		if *hang {
			waitEOF(ctx, stdin)
			return 0
		}
		in := &stallableReader{r: &inputRecorder{r: stdin, rt: o.rt}, stall: make(chan struct{})}
		o.StopReading = in.stop
		s := server.NewStdioServer(NewServer(o))
		// As many calls at once as gather may wait for (mcp-go runs 5).
		server.WithWorkerPoolSize(maxGather)(s)
		s.SetErrorLogger(log.New(stderr, "testupstream: ", log.LstdFlags))
		out := newLineRewriter(stdout)
		out.afterLine = o.rt.afterLine
		if err := s.Listen(ctx, in, out); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "testupstream: %v\n", err)
			return 1
		}
		return 0
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "testupstream: %v\n", err)
		return 1
	}
	u, err := serveHTTP(ln, *transport, o, *hang, stderr)
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(stderr, "testupstream: %v\n", err)
		return 1
	}
	defer u.stop()
	if _, err := fmt.Fprintf(stdout, "LISTENING %s\n", u.url); err != nil {
		return 1
	}
	waitEOF(ctx, stdin)
	return 0
}

// waitEOF reads and discards stdin until EOF (or any read error) or until ctx ends.
func waitEOF(ctx context.Context, stdin io.Reader) {
	eof := make(chan struct{})
	if stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	select {
	case <-eof:
	case <-ctx.Done():
	}
}

// stallableReader reads stdin until stop is called, then blocks forever:
// an upstream that stopped reading its input, whose writer then blocks once
// the pipe buffer is full.
type stallableReader struct {
	r     io.Reader
	once  sync.Once
	stall chan struct{}
}

func (s *stallableReader) stop() { s.once.Do(func() { close(s.stall) }) }

func (s *stallableReader) Read(p []byte) (int, error) {
	select {
	case <-s.stall:
		select {} // never read again; the process ends by signal or kill
	default:
		return s.r.Read(p)
	}
}
