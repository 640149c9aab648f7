// Package redistest runs a real redis-server for tests: a throwaway one on
// a free loopback port, with no persistence, that a test can kill and
// start again on the same port. It also holds what the tests of the state
// client and of every feature's Redis store share (Open, Events, WaitRedis).
// It is imported only by tests.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv makes a missing redis-server fail the tests instead of
// skipping them; CI sets it.
const RequireEnv = "TOOLGATE_REQUIRE_REDIS"

// readyTimeout bounds how long a starting server may take to say it is ready.
const readyTimeout = 15 * time.Second

// Server is one redis-server process, restartable on its port.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and its output is drained
}

// Start runs a redis-server for the test and stops it when the test ends.
// Without redis-server on PATH the test is skipped, unless RequireEnv is 1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("redis-server not found and %s=1: %v", RequireEnv, err)
		}
		t.Skip("redis-server not installed (set " + RequireEnv + "=1 to fail instead)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	// Another process may take the free port between the probe and the
	// server's bind: then the server exits, and another port is tried.
	for range 5 {
		s.port = freePort(t)
		if s.start() == nil {
			return s
		}
	}
	t.Fatalf("redis-server did not start; see %s", s.dir)
	return nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill stops the server at once (SIGKILL: no shutdown save, clients see
// the connection drop) and waits for it. Killing a stopped server is a no-op.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same port, with empty data.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redis-server did not restart on port %d: %v", s.port, err)
	}
}

// start runs the process and waits for its "Ready to accept connections"
// line: reading the log rather than sleeping or polling.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "", "--daemonize", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // none outlives a crashed test binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready, done := make(chan struct{}), make(chan struct{})
	var log strings.Builder // kept until ready, for the failure message
	go func() {
		defer close(done)
		scanLog(out, ready, &log)
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
		s.mu.Lock()
		s.cmd, s.done = cmd, done
		s.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("exited before it was ready:\n%s", log.String())
	case <-time.After(readyTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("not ready after %s:\n%s", readyTimeout, log.String())
	}
}

// scanLog closes ready at the server's ready line, keeping the lines before
// it in log, then drains the rest so the server never blocks on its stdout.
func scanLog(out io.Reader, ready chan<- struct{}, log *strings.Builder) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ready to accept connections") {
			close(ready)
			break
		}
		log.WriteString(sc.Text() + "\n")
	}
	_, _ = io.Copy(io.Discard, out)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
