package main

// The Go runtime's settings for a serving gateway: the collector's pace,
// the soft memory limit, and how many CPUs run Go code. Each yields to the
// environment variable that sets it (GOGC, GOMEMLIMIT, GOMAXPROCS): an
// operator's explicit choice wins.

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/toolgate/toolgate/config"
)

// gcPercent is the garbage collector's target for the serving gateway
// unless GOGC says otherwise. Every call allocates (JSON in and out, the
// envelope, the audit record); at Go's default of 100 the collector took
// about 15% of the gateway's CPU under load. 400 lets the heap grow to five
// times the live data between collections instead of twice: measured with
// bench/, 15% more calls per second at 16 concurrent callers, for about
// 30 MB more memory under that load (the idle footprint barely changes).
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// memoryHeadroom is the least room the soft memory limit leaves above the
// heap the ready gateway holds. gcPercent alone lets the heap grow to five
// times its live data: fine for the ~15 MB a busy gateway keeps live, not
// for large results, whose burst of live data raises that target with it.
// 50 callers each pulling two distinct 5 MiB results (bench/, the
// large-results figure) peaked at 1,025 MB without a limit, at 217 MB with
// live + 112 MiB + a 64 MiB replay table (which that load filled), and at
// 128-138 MB with live + 80 MiB + 16 MiB (whose quarter, 4 MiB, keeps a
// 5 MiB answer out); on a second host 147-164 MB, and 122-131 MB once an
// answer in flight held each copy of its text once (jsonwrite). Ordinary
// load stays under the limit and keeps gcPercent's pace: 64 callers over
// HTTP keep 13-15 MB live and collect at a 72-78 MB goal, twelve
// collections in 30,000 calls either way. A replay
// table full of small answers (16 MiB) makes it collect about twice as
// often as gcPercent would.
const memoryHeadroom = 80 << 20

// limitMemory sets the Go runtime's soft memory limit, unless GOMEMLIMIT
// says otherwise, to the live heap of the ready gateway (its catalog,
// policy and sessions), plus held: what it is configured to hold later
// (the answers kept for replay, limits.dedup.max_bytes), plus the larger of
// memoryHeadroom and the growth gcPercent allows that heap. So a large
// policy keeps its pace: with 100,000 lines (~190 MB live when this was
// measured, 80 MB at ready in later builds) a limit of live
// + 128 MiB made each call cost 1.31 times the CPU of a small policy's at
// 16 callers, collecting six times as often; and so would a full replay
// table without held. The limit is not moved later: a policy that grows
// tenfold on reload collects more often until a restart (or GOMEMLIMIT).
// It returns the limit it set (0: none).
func limitMemory(log *slog.Logger, live, held int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := live + held + max(memoryHeadroom, live*gcPercent/100)
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set (GOMEMLIMIT overrides it)", "limit_mb", limit>>20, "live_heap_mb", live>>20,
		"held_mb", held>>20)
	return limit
}

// settledHeap is the live heap of the ready gateway (its catalog, policy
// and sessions), measured once, at start, after a collection; what the
// collection freed is given back to the system: starting up (a policy's
// parse, the catalog's schemas) leaves garbage that otherwise stays
// resident until the scavenger returns it, 290 MB idle with 100,000 policy
// lines instead of 132, 30.5 with 10 upstreams instead of 29.0.
func settledHeap() int64 {
	debug.FreeOSMemory()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return int64(sample[0].Value.Uint64())
}

// leaveCPUForUpstreams runs Go code on one CPU fewer than the runtime
// would (GOMAXPROCS, itself the CPUs the machine or its cgroup allows) when
// the gateway starts stdio upstreams: they are its own child processes and
// run on the same CPUs. Unless GOMAXPROCS says otherwise, and not on a
// single CPU. It returns the setting it made (0: none); serve then hands
// it to procs.Run, which gives the CPU back to Go while calls queue for
// the processor (many callers at once) and takes it again when they stop.
//
// Why: a Go process whose calls wait on I/O wakes idle processors to look
// for work and spins them for a while before they sleep again; with every
// CPU a processor of the gateway's, that spinning takes the CPU its upstream
// and its clients need. On 2 CPUs (bench/, one caller over HTTP in front of
// the Go echo server) the gateway used 465-528 µs of CPU a call with 2 and
// 335-386 with 1, its p50 0.57 ms against 0.38-0.39, and the upstream's
// round trip as the gateway timed it 246 µs against 196-201. Many callers
// at once queue for the one processor (16 callers: 0.92-0.96 of the
// zero-check relay's calls a second, against 0.99-1.05 on two): hence
// procs.Run.
// With more CPUs the one left is a small share of the gateway's, and idle
// unless its upstreams need it.
//
// A large live heap is no exception: 100,000 policy lines (80 MB at
// ready) or 10,000 catalog tools (56 MB) cost what a 1 MB config does a
// call once the heap has grown to its goal (273 against 280 µs at one
// caller, steady state), and two processors only added the spinning. What
// a large heap does cost is its first growth after start: until then each
// call faults in fresh pages (over the first 4,000 calls, 4.2 minor
// faults a call with 100,000 lines and 0.7 with 10), with one processor or
// two; bench/ warms each scaling variant up past it before measuring.
//
// Not when every call's audit record is fsynced (audit.fsync: always): the
// fsync holds its processor until the runtime takes it back, and with one
// processor, at 16 callers, the gateway served 9-31% fewer calls a second
// than with two (four paired runs). Nor under --stdio with a stdin read
// blocking (blockingStdin: see pollableStdin), whose read holds a
// processor while the client is quiet:
// one caller's p50 was 1.44-1.69 times the relay's on one processor and
// 1.08-1.44 on two. When it declines for one of these, it says why.
//
// Setting it stops the runtime from following later changes of the
// cgroup's CPU limit (Go does while GOMAXPROCS was never set): the choice
// is made once, at start, as the soft memory limit is. In a container
// limited to one CPU or less, where Go itself runs two processors, this
// makes one; that case was not measured.
func leaveCPUForUpstreams(log *slog.Logger, cfg *config.Config, blockingStdin bool) int {
	stdio := stdioUpstreams(cfg)
	procs := runtime.GOMAXPROCS(0) - 1
	if os.Getenv("GOMAXPROCS") != "" || stdio == 0 || procs < 1 {
		return 0
	}
	var why string
	switch {
	case cfg.AuditEnabled() && cfg.AuditFsync() == config.AuditFsyncAlways:
		why = "every audit record is fsynced on the call's path (audit.fsync: always)"
	case blockingStdin:
		why = "stdin is read blocking (not a pipe or socket of its own)"
	}
	if why != "" {
		log.Info("keeping every CPU for Go although stdio upstreams run beside the gateway: "+why,
			"gomaxprocs", procs+1)
		return 0
	}
	runtime.GOMAXPROCS(procs)
	log.Info("running Go code on one CPU fewer while calls come one at a time, for the stdio upstreams, and on every CPU while they queue (GOMAXPROCS overrides it)",
		"gomaxprocs", procs, "stdio_upstreams", stdio)
	return procs
}

// stdioUpstreams counts the enabled servers the gateway runs as child
// processes.
func stdioUpstreams(c *config.Config) int {
	n := 0
	for _, s := range c.Servers {
		if !s.Disabled && s.Transport == config.TransportStdio {
			n++
		}
	}
	return n
}
