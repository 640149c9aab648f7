// Command soak is toolgate's soak run (issue 16): many calls at a fixed concurrency through the full
// pipeline, in front of two upstreams (one over stdio, one over Streamable HTTP) that inject faults
// into a fraction of the calls: crash, hang, garbage and (HTTP) 429. Afterwards it compares the audit
// trail's records with the calls made, counts the gateway's goroutines and child processes, and
// reports the gateway's RSS at the start, middle and end.
//
//	go run ./bench/soak                                   # 200,000 calls, 16 callers, 1% faults
//	go run ./bench/soak -calls 2000 -out /tmp/soak.md     # a small run
//
// It is a program, not a test: `go test` never runs it (its package's test covers the report's
// arithmetic only), and CI does not either. See bench/README.md, "Soak".
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/bench/procstat"
)

const (
	principal = "soak"
	apiKey    = "tg_soak_key_not_secret"
	adminKey  = "tg_soak_admin_key_not_secret"
	// The two upstreams, as server names in the gateway's config; the tool is flaky on both.
	stdioServer = "stdio"
	httpServer  = "http"
	tool        = "flaky"
)

type options struct {
	calls, warmup, concurrency int
	faultRate, repeat          float64
	stdioFaults, httpFaults    string
	seed                       uint64
	timeout, callTimeout       time.Duration
	settle                     time.Duration
	out, toolgate, toolgateRev string
	keep                       bool
}

func main() {
	var o options
	flag.IntVar(&o.calls, "calls", 200000, "measured calls")
	flag.IntVar(&o.warmup, "warmup", 1000, "calls before the measured ones (RSS and goroutines at start are read after them)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "concurrent callers, each with its own Streamable HTTP session")
	flag.Float64Var(&o.faultRate, "fault-rate", 0.01, "fraction of each upstream's calls that get an injected fault")
	flag.StringVar(&o.stdioFaults, "stdio-faults", "crash,hang,garbage", "the stdio upstream's faults, drawn uniformly (repeat one to weigh it)")
	flag.StringVar(&o.httpFaults, "http-faults", "crash,hang,garbage,429", "the HTTP upstream's faults, drawn uniformly")
	flag.Float64Var(&o.repeat, "repeat", 0.01, "fraction of calls that repeat earlier arguments (duplicate suppression)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the upstreams' fault draws")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Second, "the upstreams' per-server timeout: what a hang costs")
	flag.DurationVar(&o.callTimeout, "call-timeout", 30*time.Second, "the client's own bound on one call")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "wait after the last call before the end figures")
	flag.StringVar(&o.out, "out", "bench/results/soak.md", "the Markdown report; the JSON goes beside it")
	flag.StringVar(&o.toolgate, "toolgate", "", "a toolgate binary to run instead of building ./cmd/toolgate")
	flag.StringVar(&o.toolgateRev, "toolgate-rev", "", "what -toolgate was built from, for the report")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (config, logs, audit trail)")
	flag.Parse()
	if o.calls < 1 || o.concurrency < 1 || o.faultRate < 0 || o.faultRate > 1 || o.repeat < 0 || o.repeat >= 1 {
		fmt.Fprintln(os.Stderr, "soak: -calls and -concurrency must be >= 1, -fault-rate in [0, 1], -repeat in [0, 1)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	root, err := findRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "toolgate-soak-")
	if err != nil {
		return err
	}
	if o.keep {
		logf("work directory: %s (kept)", work)
	} else {
		defer os.RemoveAll(work)
	}
	rep := &Report{
		Params: Params{Calls: o.calls, Warmup: o.warmup, Concurrency: o.concurrency, FaultRate: o.faultRate, Repeat: o.repeat,
			StdioFaults: o.stdioFaults, HTTPFaults: o.httpFaults, Seed: o.seed, Timeout: o.timeout, CallTimeout: o.callTimeout, Settle: o.settle},
		Machine: Machine{CPU: procstat.CPUModel(), Cores: runtime.NumCPU(), Go: runtime.Version(),
			Kernel: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")), Date: time.Now().UTC(),
			LoadAvg: strings.TrimSpace(readFile("/proc/loadavg"))},
		RSS: map[string]int64{}, Goroutines: map[string]int{},
	}

	// Builds, outside any timing.
	bin := o.toolgate
	rep.Machine.Toolgate = o.toolgateRev
	if bin == "" {
		if bin, err = build(ctx, root, work, "toolgate", "./cmd/toolgate"); err != nil {
			return err
		}
		rep.Machine.Toolgate = commit(ctx, root)
	}
	upBin, err := build(ctx, root, work, "upstream", "./bench/soak/upstream")
	if err != nil {
		return err
	}

	// The HTTP upstream is the soak's child; the stdio one the gateway's.
	faultArgs := func(server, kinds string) []string {
		return []string{"-name", server, "-fault-rate", strconv.FormatFloat(o.faultRate, 'g', -1, 64), "-faults", kinds,
			"-fault-seed", strconv.FormatUint(o.seed, 10), "-fault-log", filepath.Join(work, "faults-"+server+".log")}
	}
	hup, err := startHTTPUpstream(ctx, upBin, append([]string{"-transport", "http"}, faultArgs(httpServer, o.httpFaults)...), filepath.Join(work, "upstream-http.log"))
	if err != nil {
		return err
	}
	defer hup.stop()

	cfg, err := writeConfig(root, work, upBin, faultArgs(stdioServer, o.stdioFaults), hup.url, o.timeout)
	if err != nil {
		return err
	}
	gw, err := startGateway(ctx, bin, cfg, filepath.Join(work, "gateway.log"))
	if err != nil {
		return err
	}
	defer gw.kill()
	logf("gateway pid %d at %s, admin %s", gw.pid(), gw.url, gw.admin)
	if err := gw.waitUpstreams(ctx, 2*time.Minute); err != nil {
		return err
	}

	hc := newHTTPClient(o.concurrency)
	sessions := make([]*session, o.concurrency)
	for i := range sessions {
		if sessions[i], err = openSession(ctx, hc, gw.url, apiKey); err != nil {
			return err
		}
	}
	d := &driver{o: o, sessions: sessions}
	pid := gw.pid()
	if m, err := gw.scrape(ctx); err == nil {
		rep.Goroutines["idle_before"] = int(m.value("go_goroutines"))
	}
	mem, _ := procstat.ReadMemory(pid)
	rep.RSS["idle_before"] = mem.RSS

	// One stream of calls: the warm-up calls, then the measured ones, without a pause between them
	// (a pause would leave only hung calls in flight, whose timeouts in a row open the breaker).
	logf("%d warm-up and %d measured calls at %d callers, %.3g%% faults", o.warmup, o.calls, o.concurrency, o.faultRate*100)
	var cpu0 procstat.Times
	var own0 time.Duration
	var busy0 time.Duration
	ownCPU := func() time.Duration { // the gateway (and children it reaped), its children now, the soak, the HTTP upstream
		var d time.Duration
		for _, p := range []int{pid, os.Getpid(), hup.cmd.Process.Pid} {
			if t, err := procstat.CPU(p); err == nil {
				d += t.Self
				if p == pid {
					d += t.Children
				}
			}
		}
		for _, t := range procstat.ReadCPU(procstat.Descendants(pid)) {
			d += t.Self
		}
		return d
	}
	var startOnce, middleOnce sync.Once
	mon := &monitor{}
	var t0 time.Time
	rep.Warmup, rep.Main = d.run(ctx, o.warmup, o.calls, func(done int64, now time.Time, second bool) {
		if done < int64(o.warmup) {
			return
		}
		startOnce.Do(func() {
			t0 = now
			m, _ := procstat.ReadMemory(pid)
			rep.RSS["start"] = m.RSS
			_ = procstat.ResetPeak(pid)
			cpu0, _ = procstat.CPU(pid)
			own0, busy0 = ownCPU(), procstat.MachineBusy()
			if sm, err := gw.scrape(ctx); err == nil {
				rep.Goroutines["start"] = int(sm.value("go_goroutines"))
			}
			logf("start figures at %d calls: RSS %s MB", done, mb(m.RSS))
		})
		if done >= int64(o.warmup+o.calls/2) {
			middleOnce.Do(func() {
				m, _ := procstat.ReadMemory(pid)
				rep.RSS["middle"] = m.RSS
				if sm, err := gw.scrape(ctx); err == nil {
					rep.Goroutines["middle"] = int(sm.value("go_goroutines"))
				}
				logf("middle figures at %d calls: RSS %s MB", done, mb(m.RSS))
			})
		}
		if second {
			m, _ := procstat.ReadMemory(pid)
			mon.add(Sample{At: now.Sub(t0).Seconds(), Done: done - int64(o.warmup), RSSMB: float64(m.RSS) / (1 << 20)})
		}
	})
	rep.Timeline = mon.samples
	if ctx.Err() != nil {
		return ctx.Err()
	}
	cpu1, _ := procstat.CPU(pid)
	rep.GatewayCPU = cpu1.Self - cpu0.Self
	if wall := rep.Main.Elapsed.Seconds() * float64(runtime.NumCPU()); wall > 0 {
		other := (procstat.MachineBusy() - busy0) - (ownCPU() - own0)
		rep.OtherCPU = max(0, other.Seconds()/wall*100)
	}
	mem, _ = procstat.ReadMemory(pid)
	rep.RSS["end"], rep.RSS["peak"] = mem.RSS, mem.Peak
	if m, err := gw.scrape(ctx); err == nil {
		rep.Goroutines["end_calls"] = int(m.value("go_goroutines"))
	}

	// End figures: sessions closed, hung calls' deadlines passed.
	for _, s := range sessions {
		s.close()
	}
	hc.CloseIdleConnections()
	logf("settle %s", o.settle)
	sleep(ctx, o.settle)
	if m, err := gw.scrape(ctx); err == nil {
		rep.Goroutines["end"] = int(m.value("go_goroutines"))
		rep.Metrics = metricsOf(m)
	} else {
		rep.Notes = append(rep.Notes, "no /metrics at the end: "+err.Error())
	}
	mem, _ = procstat.ReadMemory(pid)
	rep.RSS["end_settled"] = mem.RSS
	rep.Children = children(pid)
	rep.Children.StdioUpstreams = 1
	rep.Children.Descendants = len(procstat.Descendants(pid))

	// Upstream processes not below the gateway would be children it lost track of.
	for _, p := range upstreamPIDs(upBin, hup.cmd.Process.Pid) {
		if ppid, _, _ := stat(p); ppid != pid {
			rep.Children.Orphans = append(rep.Children.Orphans, procLine(p))
		}
	}

	// Stop the gateway, then read its trail and see what it left running.
	if err := gw.stop(10 * time.Second); err != nil {
		rep.Notes = append(rep.Notes, "gateway stop: "+err.Error())
	}
	time.Sleep(500 * time.Millisecond)
	for _, p := range upstreamPIDs(upBin, hup.cmd.Process.Pid) {
		rep.Children.LeftAfterStop = append(rep.Children.LeftAfterStop, procLine(p))
	}
	hup.stop()

	files := auditFiles(filepath.Join(work, "toolgate.audit.log"))
	if rep.Audit, err = readAudit(files); err != nil {
		rep.Notes = append(rep.Notes, "reading the audit trail: "+err.Error())
	}
	rep.Audit.CallsMade = rep.Warmup.Calls() + rep.Main.Calls()
	rep.Audit.Verify, rep.Audit.VerifyOK = verify(ctx, bin, files)
	client := map[string]map[string]int{}
	for _, ph := range []Phase{rep.Warmup, rep.Main} {
		for server, t := range ph.Servers {
			k := server + "/" + tool
			if client[k] == nil {
				client[k] = map[string]int{}
			}
			for c, n := range t.ByCode {
				client[k][c] += n
			}
		}
	}
	rep.Audit.Diffs = compareAudit(client, rep.Audit.Calls)

	rep.Faults.Injected = map[string]map[string]int{}
	for _, server := range []string{stdioServer, httpServer} {
		if f, err := os.Open(filepath.Join(work, "faults-"+server+".log")); err == nil {
			rep.Faults.Injected[server] = countFaults(f)
			f.Close()
		}
	}
	rep.Notes = append(rep.Notes, gw.logNotes()...)
	return write(o.out, rep)
}

// driver runs the calls: callers take the next call number from a shared counter, so the calls of a
// phase are spread over all of them.
type driver struct {
	o        options
	sessions []*session
	repeats  atomic.Int64
}

// callArgs is what call number i sends: its upstream (even: stdio, odd: HTTP) and its message,
// unique unless i is one of the repeated calls (a fraction share of them, evenly spread), whose
// message is one of 8 per upstream (the repeated calls alternate between the upstreams), so identical
// calls follow each other within the dedup window.
func callArgs(i int, share float64) (server, msg string, repeat bool) {
	server = stdioServer
	if i%2 == 1 {
		server = httpServer
	}
	if !isRepeat(i, share) {
		return server, "soak " + strconv.Itoa(i), false
	}
	k := int(float64(i+1) * share) // the how-manieth repeated call this is, from 1
	server = stdioServer
	if k%2 == 1 {
		server = httpServer
	}
	return server, "repeat " + strconv.Itoa((k/2)%8), true
}

// isRepeat picks exactly floor(n*share) of the first n call numbers, evenly spread.
func isRepeat(i int, share float64) bool {
	return share > 0 && int64(float64(i+1)*share) > int64(float64(i)*share)
}

// run makes calls 0 .. warmup+calls-1 and tallies the first warmup of them and the rest apart; tick,
// when set, is called every 100 ms with the calls finished so far (second: once a second).
func (d *driver) run(ctx context.Context, warmup, calls int, tick func(done int64, now time.Time, second bool)) (Phase, Phase) {
	var next, done atomic.Int64
	end := int64(warmup + calls)
	type worker struct {
		tallies [2]map[string]*Tally // warm-up, main
		details map[string]string
		first   time.Time // the start of its first main call
		last    time.Time // the end of its last call
	}
	workers := make([]*worker, len(d.sessions))
	start := time.Now()
	stopTick := make(chan struct{})
	var tickWG sync.WaitGroup
	if tick != nil {
		tickWG.Go(func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for n := 1; ; n++ {
				select {
				case <-stopTick:
					return
				case now := <-t.C:
					tick(done.Load(), now, n%10 == 0)
				}
			}
		})
	}
	var wg sync.WaitGroup
	for w, s := range d.sessions {
		wk := &worker{details: map[string]string{}}
		for k := range wk.tallies {
			wk.tallies[k] = map[string]*Tally{stdioServer: newTally(), httpServer: newTally()}
		}
		workers[w] = wk
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= end {
					return
				}
				phase := 0
				if i >= int64(warmup) {
					phase = 1
				}
				server, msg, repeat := callArgs(int(i), d.o.repeat)
				cctx, cancel := context.WithTimeout(ctx, d.o.callTimeout)
				t0 := time.Now()
				if phase == 1 && wk.first.IsZero() {
					wk.first = t0
				}
				out := s.call(cctx, server+"__"+tool, msg)
				wk.last = time.Now()
				cancel()
				wk.tallies[phase][server].add(out, wk.last.Sub(t0), repeat)
				if out.detail != "" && wk.details[out.code] == "" {
					wk.details[out.code] = out.detail
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(stopTick)
	tickWG.Wait()
	var phases [2]Phase
	var mainStart, mainEnd time.Time
	for k := range phases {
		phases[k] = Phase{Servers: map[string]*Tally{stdioServer: newTally(), httpServer: newTally()}, FirstErrs: map[string]string{}}
	}
	for _, wk := range workers {
		for k := range phases {
			for server, t := range wk.tallies[k] {
				phases[k].Servers[server].merge(t)
			}
		}
		if !wk.first.IsZero() && (mainStart.IsZero() || wk.first.Before(mainStart)) {
			mainStart = wk.first
		}
		if wk.last.After(mainEnd) {
			mainEnd = wk.last
		}
		for code, detail := range wk.details {
			if phases[1].FirstErrs[code] == "" {
				phases[1].FirstErrs[code] = detail
			}
		}
	}
	if mainStart.IsZero() {
		mainStart = start
	}
	phases[0].Elapsed = mainStart.Sub(start)
	phases[1].Elapsed = mainEnd.Sub(mainStart)
	for k := range phases {
		phases[k].finish()
	}
	return phases[0], phases[1]
}

type monitor struct {
	mu      sync.Mutex
	samples []Sample
}

func (m *monitor) add(s Sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
}

// writeConfig writes toolgate.yaml, model.conf (the repository's) and policy.csv into work: API key
// auth, a policy allowing flaky on both upstreams, rate limits far above what 16 callers reach,
// duplicate suppression and the audit trail at their defaults (fsync interval) except that the trail
// rotates at 16 MiB (so that a long run rotates it, and all 10 files kept hold 200,000 records), an admin listener
// with a key (for /metrics), breaker and retries at their defaults, and a short per-server timeout.
func writeConfig(root, work, upBin string, stdioArgs []string, httpURL string, timeout time.Duration) (string, error) {
	model, err := os.ReadFile(filepath.Join(root, "model.conf"))
	if err != nil {
		return "", err
	}
	args, _ := json.Marshal(stdioArgs)
	const bucket = "{rate: 1000000, per: 1s, burst: 1000000}"
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.2:0", key_sha256: %q}
authz: {model: model.conf, policy: policy.csv}
auth:
  api_keys:
    - {principal: %s, sha256: %q}
audit: {max_bytes: 16777216}
rate_limits:
  principal: %s
  tools:
    "%s/*": %s
    "%s/*": %s
mcpServers:
  %s:
    command: %q
    args: %s
    timeout: %s
  %s:
    url: %q
    egress: {allow: [loopback]}   # the soak's HTTP upstream listens on loopback
    timeout: %s
`, hashKey(adminKey), principal, hashKey(apiKey), bucket, stdioServer, bucket, httpServer, bucket,
		stdioServer, upBin, args, timeout, httpServer, httpURL, timeout)
	policy := fmt.Sprintf("p, soakers, %s/%s, call, allow\np, soakers, %s/%s, call, allow\ng, %s, soakers\n",
		stdioServer, tool, httpServer, tool, principal)
	for name, text := range map[string]string{"toolgate.yaml": cfg, "model.conf": string(model), "policy.csv": policy} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(work, "toolgate.yaml"), nil
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// httpUpstream is the HTTP upstream process; it serves until its stdin closes.
type httpUpstream struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	once  sync.Once
}

func startHTTPUpstream(ctx context.Context, bin string, args []string, logPath string) (*httpUpstream, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &httpUpstream{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if url, found := strings.CutPrefix(l, "LISTENING "); ok && found {
			u.url = url
			return u, nil
		}
		u.stop()
		return nil, fmt.Errorf("HTTP upstream: no LISTENING line (%q); see %s", l, logPath)
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	u.stop()
	return nil, errors.New("HTTP upstream did not start")
}

func (u *httpUpstream) stop() {
	u.once.Do(func() {
		_ = u.stdin.Close()
		done := make(chan struct{})
		go func() { _ = u.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-u.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// gateway is the running `toolgate serve`; its output goes to a file.
type gateway struct {
	cmd     *exec.Cmd
	logPath string
	url     string
	admin   string
	done    chan struct{}
	err     error
	hc      *http.Client
}

func startGateway(ctx context.Context, bin, cfg, logPath string) (*gateway, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// At debug the log has a tools/call line for every call (at info, a
	// success the audit trail recorded has none), which logNotes counts.
	cmd := exec.Command(bin, "serve", "--config", cfg, "--log-level", "debug")
	cmd.Dir = filepath.Dir(cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &gateway{cmd: cmd, logPath: logPath, done: make(chan struct{}), hc: &http.Client{Timeout: 10 * time.Second}}
	go func() { g.err = cmd.Wait(); close(g.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for g.url == "" || g.admin == "" {
		select {
		case <-g.done:
			return nil, fmt.Errorf("toolgate exited (%v); see %s:\n%s", g.err, logPath, tail(logPath, 20))
		case <-ctx.Done():
			g.kill()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.kill()
			return nil, fmt.Errorf("toolgate did not log its listeners; see %s", logPath)
		}
		g.url, g.admin = logURL(logPath, "serving Streamable HTTP"), logURL(logPath, "serving the admin API")
	}
	return g, nil
}

func (g *gateway) pid() int { return g.cmd.Process.Pid }

// waitUpstreams waits until /metrics says both upstreams are up.
func (g *gateway) waitUpstreams(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		m, err := g.scrape(ctx)
		if err == nil && m[`toolgate_upstream_up{server="`+stdioServer+`"}`] == 1 && m[`toolgate_upstream_up{server="`+httpServer+`"}`] == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("upstreams not up after %s (%v); see %s", limit, err, g.logPath)
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// metricSet is a scrape: "name{labels}" -> value.
type metricSet map[string]float64

func (m metricSet) value(name string) float64 { return m[name] }

// sum adds the series of name whose labels contain every one of match; by, when set, groups them by
// that label's value.
func (m metricSet) by(name, label string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		base, labels, ok := strings.Cut(k, "{")
		if base != name || !ok {
			continue
		}
		out[labelValue(labels, label)] += v
	}
	return out
}

func labelValue(labels, label string) string {
	i := strings.Index(labels, label+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(label)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

func (g *gateway) scrape(ctx context.Context) (metricSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	m := metricSet{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

func metricsOf(m metricSet) Metrics {
	out := Metrics{CallsTotal: map[string]float64{}, UpstreamOutcome: map[string]float64{}}
	for code, v := range m.by("toolgate_calls_total", "error_code") {
		if code == "" {
			code = "ok"
		}
		out.CallsTotal[code] += v
	}
	out.Restarts = m.by("toolgate_upstream_restarts_total", "server")
	out.Duplicates = m.by("toolgate_duplicates_suppressed_total", "how")
	out.AuditErrors = m.value("toolgate_audit_write_errors_total")
	for k, v := range m {
		base, labels, ok := strings.Cut(k, "{")
		if ok && base == "toolgate_upstream_request_duration_seconds_count" {
			out.UpstreamOutcome[labelValue(labels, "server")+"/"+labelValue(labels, "outcome")] += v
		}
	}
	return out
}

// stop sends SIGTERM (toolgate then stops its upstreams) and waits; after grace it kills the group.
func (g *gateway) stop(grace time.Duration) error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(grace):
		_ = syscall.Kill(-g.pid(), syscall.SIGKILL)
		<-g.done
		return fmt.Errorf("did not exit within %s of SIGTERM: killed", grace)
	}
	var exit *exec.ExitError
	if g.err != nil && !errors.As(g.err, &exit) {
		return g.err
	}
	if g.err != nil {
		return fmt.Errorf("exit: %v", g.err)
	}
	return nil
}

// kill ends whatever is left of the gateway's process group (a deferred safety net).
func (g *gateway) kill() {
	select {
	case <-g.done:
	default:
		_ = syscall.Kill(-g.pid(), syscall.SIGKILL)
		<-g.done
	}
	_ = syscall.Kill(-g.pid(), syscall.SIGKILL)
}

// logNotes counts the gateway's log lines by level, message and server, except the one line per
// tools/call (the gateway logs at debug here), whose number it gives alone (it should equal the
// calls made).
func (g *gateway) logNotes() []string {
	f, err := os.Open(g.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	counts := map[string]int{}
	calls := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l struct {
			Level  string `json:"level"`
			Msg    string `json:"msg"`
			Server string `json:"server"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			counts["(not JSON) "+truncate(sc.Text(), 120)]++
			continue
		}
		if l.Msg == "tools/call" {
			calls++
			continue
		}
		k := l.Level + " " + l.Msg
		if l.Server != "" {
			k += " (server " + l.Server + ")"
		}
		counts[k]++
	}
	out := []string{fmt.Sprintf("gateway log: %d tools/call lines", calls)}
	for _, k := range sortedKeys(counts) {
		out = append(out, fmt.Sprintf("gateway log: %d × %s", counts[k], k))
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// logURL is the url attribute of the first log line holding msg.
func logURL(path, msg string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), msg) {
			continue
		}
		var l struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.URL != "" {
			return l.URL
		}
	}
	return ""
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// children lists the processes whose parent is pid, with their state.
func children(pid int) Children {
	var c Children
	for _, p := range allPIDs() {
		ppid, state, comm := stat(p)
		if ppid != pid {
			continue
		}
		c.AtEnd = append(c.AtEnd, fmt.Sprintf("%d %s %s", p, comm, state))
		if state == "Z" {
			c.Zombies++
		}
	}
	return c
}

// upstreamPIDs lists the live processes running bin, except the one given (the HTTP upstream).
func upstreamPIDs(bin string, except int) []int {
	var out []int
	for _, p := range allPIDs() {
		if p == except {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && exe == bin {
			out = append(out, p)
		}
	}
	return out
}

func procLine(p int) string {
	ppid, state, comm := stat(p)
	return fmt.Sprintf("%d %s %s (parent %d)", p, comm, state, ppid)
}

func allPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// stat reads a process's parent, state and command from /proc/<pid>/stat.
func stat(pid int) (ppid int, state, comm string) {
	raw := readFile(fmt.Sprintf("/proc/%d/stat", pid))
	open, closing := strings.IndexByte(raw, '('), strings.LastIndexByte(raw, ')')
	if open < 0 || closing < open {
		return 0, "", ""
	}
	comm = raw[open+1 : closing]
	f := strings.Fields(raw[closing+1:])
	if len(f) < 2 {
		return 0, "", comm
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0], comm
}

// auditFiles is the trail and its rotated files, oldest first (base.N .. base.1, base).
func auditFiles(base string) []string {
	var rotated []int
	matches, _ := filepath.Glob(base + ".*")
	for _, m := range matches {
		if n, err := strconv.Atoi(strings.TrimPrefix(m, base+".")); err == nil {
			rotated = append(rotated, n)
		}
	}
	slices.Sort(rotated)
	var out []string
	for i := len(rotated) - 1; i >= 0; i-- {
		out = append(out, fmt.Sprintf("%s.%d", base, rotated[i]))
	}
	return append(out, base)
}

// verify runs `toolgate audit verify` on the files.
func verify(ctx context.Context, bin string, files []string) (string, bool) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"audit", "verify"}, files...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

func build(ctx context.Context, root, work, name, pkg string) (string, error) {
	out := filepath.Join(work, name)
	logf("go build -o %s %s", out, pkg)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// commit names the toolgate source built: HEAD, and whether the tree outside bench/ had changes.
func commit(ctx context.Context, root string) string {
	out := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		b, _ := cmd.Output()
		return strings.TrimSpace(string(b))
	}
	head := out("rev-parse", "--short", "HEAD")
	if head == "" {
		return "(not a git checkout)"
	}
	if out("status", "--porcelain", "--", ".", ":!bench") != "" {
		return head + " with uncommitted changes"
	}
	return "commit " + head
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
