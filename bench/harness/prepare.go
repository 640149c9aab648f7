package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bench/echo"
	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// prepare builds what is missing and installs the npm packages if the run
// needs them.
func prepare(ctx context.Context, o *Options, work string) (*env, error) {
	e := &env{toolgate: o.Toolgate, baseline: o.Baseline, npmDir: o.NPMDir, work: work}
	if e.baseline == "" && o.Table && (slices.Contains(o.Targets, BaselineHTTP) || slices.Contains(o.Targets, BaselineStdio)) {
		return nil, fmt.Errorf("targets %s and %s need a baseline binary (-baseline)", BaselineHTTP, BaselineStdio)
	}
	var err error
	if e.toolgate == "" {
		if e.toolgate, err = build(ctx, o, work, "toolgate", "./cmd/toolgate"); err != nil {
			return nil, err
		}
	}
	cmd := o.Echo
	if len(cmd) == 0 {
		bin, err := build(ctx, o, work, "echoserver", "./bench/cmd/echoserver")
		if err != nil {
			return nil, err
		}
		cmd = []string{bin}
	}
	e.echo = targets.Upstream{Name: GoEcho, Command: cmd[0], Args: cmd[1:], Env: o.EchoEnv, Tool: echo.Tool}
	if o.Table && (slices.Contains(o.Targets, RelayHTTP) || slices.Contains(o.Targets, RelayStdio)) {
		cmd := o.Relay
		if len(cmd) == 0 {
			bin, err := build(ctx, o, work, "relay", "./bench/cmd/relay")
			if err != nil {
				return nil, err
			}
			cmd = []string{bin}
		}
		e.relay = targets.Relay{Command: cmd, Env: o.RelayEnv}
	}
	model, err := os.ReadFile(filepath.Join(o.Root, "model.conf"))
	if err != nil {
		return nil, err
	}
	e.model = string(model)
	if needsNPM(o) {
		fmt.Fprintln(o.Log, "npm packages: checking bench/npm (npm install when missing)")
		e.npm = targets.EnsureNPM(ctx, o.NPMDir)
	}
	e.fsync = fsyncCost(work)
	return e, nil
}

func needsNPM(o *Options) bool {
	return o.Table && (slices.Contains(o.Upstreams, Everything) ||
		slices.Contains(o.Targets, MCPProxy) || slices.Contains(o.Targets, Supergateway))
}

// build compiles pkg of the module into work/name.
func build(ctx context.Context, o *Options, work, name, pkg string) (string, error) {
	out := filepath.Join(work, name)
	args := append(append([]string{"build"}, o.BuildFlags...), "-o", out, pkg)
	fmt.Fprintf(o.Log, "go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// FindRoot walks up from dir to the directory holding go.mod.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// machine describes this machine and the toolgate commit measured.
func machine(ctx context.Context, root string) report.Machine {
	return report.Machine{CPU: procstat.CPUModel(), Cores: runtime.NumCPU(), Go: runtime.Version(),
		Node: output(ctx, "", "node", "--version"), Kernel: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		Date: time.Now().UTC(), Toolgate: commit(ctx, root)}
}

// commit names the toolgate source measured: HEAD, and whether the tree
// outside bench/ had changes (someone may be editing the hot path).
func commit(ctx context.Context, root string) string {
	head := output(ctx, root, "git", "rev-parse", "--short", "HEAD")
	if head == "" {
		return "(not a git checkout)"
	}
	if dirty := output(ctx, root, "git", "status", "--porcelain", "--", ".", ":!bench"); dirty != "" {
		return head + " with uncommitted changes"
	}
	return "commit " + head
}

func output(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// fsyncCost is the median time of appending a small record and fsyncing
// it in dir: what toolgate's audit trail pays per call with fsync: always
// (group commit shares it between concurrent calls).
func fsyncCost(dir string) time.Duration {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	record := []byte(strings.Repeat("x", 300) + "\n")
	times := make([]time.Duration, 0, 50)
	for range 50 {
		t0 := time.Now()
		if _, err := f.Write(record); err != nil || f.Sync() != nil {
			return 0
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	return times[len(times)/2]
}
