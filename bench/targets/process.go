package targets

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/bench/procstat"
)

// tailLines is how much of a child's output is kept for error messages.
const tailLines = 20

// process is a child the harness started and must stop: a gateway or a
// peer proxy. Its stdout and stderr are read line by line (nothing may
// block it on a full pipe), the last lines kept, and the first line holding
// each awaited text remembered, so readiness is a log line, never a sleep.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and its output is drained
	err  error         // Wait's result, after done

	mu    sync.Mutex
	tail  []string
	found map[string]chan string // awaited text -> its first line (buffered 1)
	seen  map[string]bool        // awaited texts already found
}

// startProcess starts name with args in its own process group, dying with
// the harness, and watches its output for each text in await.
func startProcess(name string, args []string, env map[string]string, dir string, await ...string) (*process, error) {
	return launch(command(name, args, env, dir), nil, await...)
}

// startPiped starts name as a stdio server, like startProcess, except that
// its stdin and stdout are the caller's pipes (the lean client speaks on
// them); stderr is watched as startProcess watches the output.
func startPiped(name string, args []string, env map[string]string) (*process, io.WriteCloser, io.ReadCloser, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	cmd := command(name, args, env, "")
	cmd.Stdin, cmd.Stdout = inR, outW
	p, err := launch(cmd, []*os.File{inR, outW})
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, nil, err
	}
	return p, inW, outR, nil
}

func command(name string, args []string, env map[string]string, dir string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = mergeEnv(env)
	cmd.SysProcAttr = childAttr()
	return cmd
}

// launch starts cmd with its stderr, and its stdout unless set, on a pipe
// the process reads; childEnds are the child's ends of other pipes, closed
// here once it has its own copies.
func launch(cmd *exec.Cmd, childEnds []*os.File, await ...string) (*process, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = pw
	if cmd.Stdout == nil {
		cmd.Stdout = pw
	}
	p := &process{cmd: cmd, done: make(chan struct{}), found: map[string]chan string{}, seen: map[string]bool{}}
	for _, text := range await {
		p.found[text] = make(chan string, 1)
	}
	err = cmd.Start()
	pw.Close() // the child holds its own copy; EOF comes when it exits
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		pr.Close()
		return nil, err
	}
	go p.read(pr)
	return p, nil
}

// childAttr puts a child in its own process group, so that stopping it
// also reaches what it started, and kills it if the harness dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// mergeEnv is the harness's environment plus env.
func mergeEnv(env map[string]string) []string {
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func (p *process) read(r io.ReadCloser) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.line(sc.Text())
	}
	// A line longer than the buffer stops the scanner: keep draining, so
	// the child never blocks on its output.
	_, _ = io.Copy(io.Discard, r)
	r.Close()
	p.err = p.cmd.Wait()
}

func (p *process) line(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == tailLines {
		p.tail = p.tail[1:]
	}
	p.tail = append(p.tail, text)
	for want, ch := range p.found {
		if !p.seen[want] && strings.Contains(text, want) {
			ch <- text
			p.seen[want] = true
		}
	}
}

// pid is the child's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// waitLine waits for the first output line holding text (one given to
// startProcess), failing if the child exits or ctx ends first.
func (p *process) waitLine(ctx context.Context, text string) (string, error) {
	p.mu.Lock()
	ch, ok := p.found[text]
	p.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%q was not awaited", text)
	}
	select {
	case line := <-ch:
		return line, nil
	case <-p.done:
		return "", fmt.Errorf("exited before printing %q (%v); last output:\n%s", text, p.err, p.lastOutput())
	case <-ctx.Done():
		return "", fmt.Errorf("no %q: %w; last output:\n%s", text, ctx.Err(), p.lastOutput())
	}
}

// lastOutput is the tail of the child's output, for error messages.
func (p *process) lastOutput() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// exited reports whether the child has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the child to end (SIGTERM: toolgate then stops its upstreams),
// kills it after grace, and then kills whatever is left of what it started:
// its process group, and descendants that left the group (supergateway
// starts each session's upstream in a group of its own).
func (p *process) stop(grace time.Duration) error {
	pgid := p.pid()
	started := procstat.Descendants(pgid)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for _, pid := range started {
		_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH when it already ended
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		return p.err
	}
	return nil
}
