package upstreams

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/sanitize"
)

// inheritedEnv names the variables a stdio upstream inherits from the
// gateway. Everything else it gets comes from its `env` in config: the
// gateway's own secrets (API keys, cloud credentials) never reach a child.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ", "TMPDIR"}

// childEnv builds a child's environment: the allowlist, LC_* locale
// variables, then the configured entries (which win).
func childEnv(parent []string, configured map[string]string) []string {
	var env []string
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LC_") || contains(inheritedEnv, name) {
			if _, overridden := configured[name]; !overridden {
				env = append(env, kv)
			}
		}
	}
	for k, v := range configured {
		env = append(env, k+"="+v)
	}
	return env
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// process is a running stdio upstream.
type process struct {
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	stdout     *os.File // read end, owned by the transport's reader until stop closes it
	exited     chan struct{}
	err        error // from Wait, valid after exited is closed
	stderr     *tailRing
	stderrDone chan struct{} // closed when stderr reached its end
}

// How long Close waits after closing stdin, then after SIGTERM, before
// escalating. A well-behaved server exits on stdin EOF at once.
const (
	stdinGrace = 2 * time.Second
	termGrace  = 2 * time.Second
)

// spawn starts command with its own process group (so Close can signal
// every process it started) and a death signal (so it dies with the
// gateway even if the gateway is killed). stderr lines are logged, tagged by
// the logger, one record per line, secrets redacted by lines (nil: none).
func spawn(command string, args []string, dir string, env []string, log *slog.Logger, lines *redact.Lines) (*process, error) {
	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// os.Pipe rather than StdoutPipe: Wait must not close the read end
	// while the transport is still reading the last messages.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: outR, exited: make(chan struct{}),
		stderr: &tailRing{}, stderrDone: make(chan struct{})}
	go func() {
		defer close(p.stderrDone)
		logLines(errR, log, p.stderr, lines)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// maxStderrLine bounds one logged stderr line.
const maxStderrLine = 4 << 10

// logLines logs each line of a child's stderr, redacted, and keeps the last
// ones for when it exits. A line longer than maxStderrLine is logged up to
// its last separator within the limit (cutLongLine) and the rest of it is
// dropped: logged in pieces, a secret that straddled a cut would reach the
// log as two halves no pattern matches.
func logLines(r io.ReadCloser, log *slog.Logger, tail *tailRing, lines *redact.Lines) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if long {
			line = cutLongLine(line)
		}
		text := sanitizeLine(line) // a copy: the next read reuses line's bytes
		if long {
			text = strings.TrimSpace(text + longLineMark)
			err = skipRestOfLine(br)
		}
		if text != "" {
			clean := lines.Line(text)
			log.Info("upstream stderr", "line", clean)
			tail.add(clean)
		}
		if err != nil {
			return
		}
	}
}

// longLineMark ends a stderr line that was cut.
const longLineMark = " [line cut at 4 KiB]"

// cutLongLine is the part of an over-long line before its last separator
// (space, tab, comma, semicolon, quote or equals sign), so the cut never
// falls inside a token such as a key; none: nothing of it.
func cutLongLine(line []byte) []byte {
	if i := bytes.LastIndexAny(line, " \t,;\"'="); i >= 0 {
		return line[:i]
	}
	return nil
}

// skipRestOfLine reads up to and including the next newline; its error is
// the reader's (nil once the newline is read).
func skipRestOfLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// sanitizeLine strips the newline and control characters so an upstream
// cannot forge log lines or terminal escapes.
func sanitizeLine(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, string(b))
}

// alive reports whether the process has not exited.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop ends the process: stdin EOF first, then SIGTERM, then SIGKILL to the
// whole process group, so no child outlives the gateway. The read end of
// stdout is closed first: nothing more will be read, a child blocked writing
// to it (an endless answer) fails at once instead of holding out until
// SIGKILL, and the transport's reader ends even if a grandchild still holds
// the write end.
func (p *process) stop() {
	p.stdout.Close()
	p.stdin.Close()
	if p.waitExit(stdinGrace) {
		// The leader exited; anything it left behind in its group goes too.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	if p.waitExit(termGrace) {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// status describes how the process ended ("exit status 3", "signal:
// killed"), or "" while it runs.
func (p *process) status() string {
	if p.alive() {
		return ""
	}
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// stderrTail waits (at most wait) for stderr to reach its end, then returns
// its last lines.
func (p *process) stderrTail(wait time.Duration) []string {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.stderrDone:
	case <-t.C:
	}
	return p.stderr.lines()
}

// Bounds of the stderr tail logged when a stdio upstream exits.
const (
	tailLines     = 20
	tailLineBytes = 512
)

// tailRing keeps the last tailLines stderr lines, each at most tailLineBytes.
type tailRing struct {
	mu   sync.Mutex
	ring [tailLines]string
	n    int // lines added so far
}

func (t *tailRing) add(line string) {
	line = sanitize.Clip(sanitize.Text(line), tailLineBytes)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.n%tailLines] = line
	t.n++
}

// lines returns the kept lines, oldest first.
func (t *tailRing) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := max(0, t.n-tailLines)
	out := make([]string, 0, t.n-start)
	for i := start; i < t.n; i++ {
		out = append(out, t.ring[i%tailLines])
	}
	return out
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}
