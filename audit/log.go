package audit

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/flights"
)

// FsyncPolicy says when written records are flushed to disk.
type FsyncPolicy string

// The fsync policies.
const (
	// FsyncAlways: Append returns only after the record is on disk.
	// Concurrent appends share one fsync (group commit).
	FsyncAlways FsyncPolicy = "always"
	// FsyncInterval: a background goroutine flushes at most every
	// FsyncInterval; a crash loses at most that much.
	FsyncInterval FsyncPolicy = "interval"
	// FsyncNever leaves flushing to the operating system, even at rotation
	// and Close.
	FsyncNever FsyncPolicy = "never"
)

// Defaults for the zero Options fields.
const (
	DefaultFsync               = FsyncAlways
	DefaultFsyncInterval       = time.Second
	DefaultMaxBytes      int64 = 100 << 20 // 100 MiB
	DefaultMaxFiles            = 10
)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: log closed")

// Options configure a Log. Zero values mean the defaults above.
type Options struct {
	Path          string        // the trail; rotated files are Path.1, Path.2, …
	Fsync         FsyncPolicy   // always (default), interval or never
	FsyncInterval time.Duration // with FsyncInterval: the longest a record stays unflushed
	MaxBytes      int64         // rotate before a record would take the file past this
	MaxFiles      int           // rotated files kept besides Path; older ones are deleted
	IncludeArgs   bool          // write Record.Args (redacted), not only their digest
	Redact        []string      // argument fields written as "[redacted]": "password", "card.number"
	// Slots is how many trails Path may have, one per process writing at
	// once: when another process holds Path, Open takes the first free of
	// SlotPath(Path, 2) … SlotPath(Path, Slots) instead. 1 means no
	// fallback; zero means DefaultSlots.
	Slots int
	// FailClosed is carried for the caller, which refuses calls while
	// Append fails (or Err is not nil) when it is set. The Log behaves the
	// same either way: it never drops a record without returning an error.
	FailClosed bool
	// OnError, when set, is called with every failure: failed writes and
	// fsyncs, and also problems that did not cost the record, such as a
	// failed rotation or a file removed behind the Log's back. Metrics count
	// them here. It runs outside the Log's lock (it may call Err, not
	// Append) and may be called from several goroutines at once.
	OnError func(error)
	Now     func() time.Time // the clock for records without a Time; default time.Now
	// KeepRecent is how many of the last lines written Recent can return (the console's live
	// calls); zero keeps none. KeepRecentBytes bounds their bytes; zero: DefaultKeepRecentBytes.
	KeepRecent      int
	KeepRecentBytes int
}

// file is what the Log needs of an open file; tests inject failing ones.
type file interface {
	Write([]byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
}

// hooks are the seams tests use in place of the file system and the clock.
type hooks struct {
	open func(path string) (file, error)
	// tick starts the interval flusher's ticker.
	tick func(d time.Duration) (<-chan time.Time, func())
	// clock and statEvery pace the check that Path still names the open
	// file (see replaced): at most one stat per statEvery of clock.
	clock     func() time.Time
	statEvery time.Duration
}

var realHooks = hooks{
	open: func(path string) (file, error) {
		return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	},
	tick: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	},
	clock:     time.Now,
	statEvery: replacedCheckEvery,
}

// replacedCheckEvery is how often (at most) Append checks that Path still
// names the open file, unless FailClosed (then every record checks). A
// stat per record cost 2% of the gateway's CPU under load; once a
// millisecond was still a stat every other call for one caller over HTTP
// (0.6 ms a call): 29% of Append's CPU samples under perf, about 6 µs a
// call. Every 10 ms it is one call in 16 for one caller, one in 50 at
// 5,000 calls/s. The price: records written within 10 ms of someone moving
// the file go to the moved file (still chained, and found by Verify next
// to it), and within 10 ms of someone deleting it are lost with the rest
// of it. An operator who runs with fail_closed wants the trail exactly
// where it is configured, and pays the stat per record.
const replacedCheckEvery = 10 * time.Millisecond

// Log appends records to the trail. It is safe for concurrent use.
type Log struct {
	opts   Options
	enc    encoder
	hooks  hooks
	unlock func() // releases Path.lock
	slot   int    // opts.Path is SlotPath(Options.Path as given, slot)

	mu   sync.Mutex
	cond *sync.Cond // broadcast when an fsync outside mu ends
	f    file       // nil after a failure closed it; the next Append reopens
	id   fs.FileInfo
	size int64
	seq  uint64 // of the last record written
	prev string // hash of the last line written
	// lines and ends are chain's buffers, reused flight after flight.
	lines []byte
	ends  []int
	// broken: a failed write left bytes that could not be truncated away
	// (the truncate's error), so the file must be reopened and its tail
	// checked before the next write. Kept until a reopen succeeds, so the
	// check can say why the tail is not the chain's.
	broken  error
	statDue time.Time // replaced skips the stat before this (hooks.clock)
	dirty   bool      // written since the last fsync
	syncing bool      // an fsync of f runs outside mu; f must not be closed meanwhile
	pending *batch    // FsyncAlways: records written and not yet flushed
	closed  bool

	syncMu sync.Mutex // one group-commit fsync at a time

	flights flights.Group[[]byte, written] // records waiting for their write; taken before mu

	recent *recentLines // the last lines written, for Recent; nil: none kept

	// The trail's health, in two parts so that each is set in the order
	// its operations ran: writes by the flight that made them (before it
	// lands, so before the next flight writes), fsyncs by whoever ran
	// them. Set by the waiting callers instead, a caller of an earlier
	// flight that ran late could overwrite a later flight's outcome, and
	// an fsync of earlier lines could clear a later write's failure.
	// nil: the last one succeeded.
	writeHealth, syncHealth atomic.Pointer[error]

	stop chan struct{} // closes the interval flusher
	done chan struct{} // closed when it has returned
}

// batch is a group of FsyncAlways records flushed by one fsync.
type batch struct {
	done chan struct{} // closed when err is set
	err  error
}

// Open opens (or creates) the trail at o.Path and continues its chain from
// the last record there. It takes an flock on o.Path + ".lock" for the
// Log's lifetime: two writers would fork the chain, and the other one
// holds it for its whole life, so waiting would not help. When another
// process holds it, Open takes the first slot no process holds
// (SlotPath(o.Path, 2), 3, … up to o.Slots) the same way, and continues
// that slot's own chain; Path and Slot say which trail it took. It fails
// when every slot is held.
func Open(o Options) (*Log, error) { return open(o, realHooks) }

func open(o Options, h hooks) (*Log, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	path, slot, unlock, err := lockSlot(o)
	if err != nil {
		return nil, err
	}
	o.Path = path
	if o.FailClosed {
		h.statEvery = 0 // every record checks the path (see replacedCheckEvery)
	}
	l := &Log{opts: o, enc: newEncoder(o), hooks: h, unlock: unlock, slot: slot,
		recent: newRecentLines(o.KeepRecent, cmp.Or(o.KeepRecentBytes, DefaultKeepRecentBytes))}
	l.cond = sync.NewCond(&l.mu)
	if l.seq, l.prev, err = chainHead(o.Path); err == nil {
		err = l.openCurrent()
	}
	if err != nil {
		unlock()
		return nil, err
	}
	l.recent.seed(o.Path)
	if o.Fsync == FsyncInterval {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		tick, stop := h.tick(o.FsyncInterval)
		go l.flushLoop(tick, stop)
	}
	return l, nil
}

func withDefaults(o Options) (Options, error) {
	if o.Path == "" {
		return o, errors.New("audit: no file")
	}
	o.Fsync = cmp.Or(o.Fsync, DefaultFsync)
	switch o.Fsync {
	case FsyncAlways, FsyncInterval, FsyncNever:
	default:
		return o, fmt.Errorf("audit: fsync policy %q: expected always, interval or never", o.Fsync)
	}
	if o.Slots < 0 {
		return o, fmt.Errorf("audit: %d slots: expected at least 1", o.Slots)
	}
	o.Slots = cmp.Or(o.Slots, DefaultSlots)
	o.FsyncInterval = cmp.Or(o.FsyncInterval, DefaultFsyncInterval)
	o.MaxBytes = cmp.Or(o.MaxBytes, DefaultMaxBytes)
	o.MaxFiles = cmp.Or(o.MaxFiles, DefaultMaxFiles)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Path is the trail this Log writes: Options.Path, or the slot of it
// Open took because another process holds Options.Path.
func (l *Log) Path() string { return l.opts.Path }

// Slot is the number of the trail Path is: 1 for Options.Path itself, n
// for SlotPath(Options.Path, n).
func (l *Log) Slot() int { return l.slot }

// FailClosed reports Options.FailClosed: whether the caller should refuse
// calls while the trail cannot be written.
func (l *Log) FailClosed() bool { return l.opts.FailClosed }

// Err is the trail's health: the error of the last write if it failed,
// else of the last fsync if it failed, else nil. Readiness checks read it.
func (l *Log) Err() error {
	if p := l.writeHealth.Load(); p != nil {
		return *p
	}
	if p := l.syncHealth.Load(); p != nil {
		return *p
	}
	return nil
}

// setHealth records the outcome of a write or fsync in h; ErrClosed is no
// outcome.
func setHealth(h *atomic.Pointer[error], err error) {
	switch {
	case err == nil:
		h.Store(nil)
	case !errors.Is(err, ErrClosed):
		h.Store(&err)
	}
}

// Append writes r as the next line of the chain. It returns nil once the
// record is written, and with FsyncAlways once it is on disk. An error
// means the record cannot be counted on: a failed write leaves nothing in
// the file (and takes no seq), a failed fsync leaves a line that may not
// survive a crash. Either way the caller should treat the decision as
// unaudited (and, with FailClosed, refuse the call).
//
// Records appended while another group is being written go out together,
// in one write(2), once it is done (package flights): under load the trail
// costs one system call for several calls, not one each.
func (l *Log) Append(r Record) error {
	body, err := l.enc.body(r) // outside the lock: encoding is the slow part
	if err != nil {
		return err
	}
	f, first := l.flights.Board(body)
	if first {
		l.fly(f)
	}
	out := f.Wait()
	if err = out.err; err == nil && out.b != nil {
		err = l.commit(out.b)
	}
	l.tell(err) // each record lost is told; the health is set where it happened
	return err
}

// written is the outcome of a flight of records (package flights): one
// write(2) for the records of the calls that finished while the flight
// before was written. BenchmarkAppend/interval/parallel (16 writers a CPU,
// 2 CPUs): 7.2-7.7 µs a record with a write each, 4.0-5.1 in flights.
type written struct {
	b   *batch // FsyncAlways: the fsync batch the records are in
	err error  // the write failed: no record of the flight was written
}

// fly writes the flight f started.
func (l *Log) fly(f *flights.Flight[[]byte, written]) {
	l.flights.Depart(f)
	l.mu.Lock()
	b, warn, err := l.write(f.Items)
	l.mu.Unlock()
	setHealth(&l.writeHealth, err)
	f.Result = written{b, err}
	f.Land()
	l.warn(warn)
}

// write appends the lines of bodies under mu: reopening, rotating and
// checking the file first as needed. It returns the batch to wait for
// (FsyncAlways), a problem that did not cost the records, and the error
// that did.
func (l *Log) write(bodies [][]byte) (b *batch, warn, err error) {
	rotateFailed := false
	for repairs := 0; ; {
		if l.closed {
			return nil, warn, ErrClosed
		}
		if repairs > maxRepairs {
			return nil, warn, fmt.Errorf("audit: %s keeps being moved or removed; the record was not written", l.opts.Path)
		}
		if l.f == nil {
			if err := l.openCurrent(); err != nil {
				return nil, warn, err
			}
		}
		lines, ends, last := l.chain(bodies)
		replaced := l.replaced()
		full := !rotateFailed && l.size > 0 && l.size+int64(len(lines)) > l.opts.MaxBytes
		if !replaced && !full && l.broken == nil {
			b, err := l.put(lines, ends, last)
			return b, warn, err
		}
		if l.syncing { // an fsync outside mu still uses l.f
			l.cond.Wait()
			continue
		}
		repairs++
		switch {
		case l.broken != nil:
			warn = errors.Join(warn, l.retireUntold())
		case replaced:
			warn = errors.Join(warn, fmt.Errorf("audit: %s was moved, removed or replaced by something else; "+
				"continuing the chain in a new file there", l.opts.Path), l.retireUntold())
		default:
			if err := l.rotate(); err != nil {
				warn, rotateFailed = errors.Join(warn, err), true
			}
		}
	}
}

// chain makes the lines of bodies, continuing the chain from the last
// line written: all in one buffer, ends[i] the end of the i-th (its
// newline included), last the hash of the last. Under mu; lines and ends
// are the Log's, valid until the next chain.
func (l *Log) chain(bodies [][]byte) (lines []byte, ends []int, last string) {
	size := 0
	for _, body := range bodies {
		size += len(body) + lineOverhead
	}
	lines, last = slices.Grow(l.lines[:0], size), l.prev
	ends = slices.Grow(l.ends[:0], len(bodies))[:len(bodies)]
	for i, body := range bodies {
		start := len(lines)
		lines = appendLine(lines, l.seq+uint64(i)+1, last, body)
		ends[i] = len(lines)
		last = hashLine(lines[start : len(lines)-1])
	}
	if cap(lines) <= maxKeptLines {
		l.lines, l.ends = lines, ends
	}
	return lines, ends, last
}

// maxKeptLines: chain keeps its buffer for the next flight up to this
// size (a flight of 16 calls' records is about 8 KiB); a flight with a
// huge record allocates its own.
const maxKeptLines = 64 << 10

// maxRepairs bounds the reopens and rotations one Append may do, in case
// something keeps removing the file as soon as it is created.
const maxRepairs = 4

// put writes lines (ends and last as chain gives them) with one write; a
// failed write is undone so the file never holds a partial line that the
// next one would be glued to.
func (l *Log) put(lines []byte, ends []int, last string) (*batch, error) {
	n, err := l.f.Write(lines)
	if err != nil {
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				l.broken = terr
			}
		}
		return nil, fmt.Errorf("audit: write %s: %w", l.opts.Path, err)
	}
	l.size += int64(n)
	l.seq += uint64(len(ends))
	l.prev = last
	start := 0
	for _, end := range ends {
		l.recent.add(lines[start : end-1]) // copied: lines is reused

		start = end
	}
	l.dirty = true
	if l.opts.Fsync != FsyncAlways {
		return nil, nil
	}
	if l.pending == nil {
		l.pending = &batch{done: make(chan struct{})}
	}
	return l.pending, nil
}

// commit waits until b is on disk. The first waiter to get syncMu flushes
// every record written so far, outside mu so that appends go on meanwhile;
// the others find their batch already done.
func (l *Log) commit(b *batch) error {
	l.syncMu.Lock()
	select {
	case <-b.done:
		l.syncMu.Unlock()
		return b.err
	default:
	}
	l.mu.Lock()
	cur, f := l.pending, l.f
	l.pending = nil
	if cur != nil { // nil: rotation or Close flushed it under mu meanwhile
		l.syncing, l.dirty = true, false
	}
	l.mu.Unlock()
	if cur != nil {
		err := f.Sync()
		if err != nil {
			err = fmt.Errorf("audit: fsync %s: %w", l.opts.Path, err)
		}
		l.mu.Lock()
		l.syncing = false
		setHealth(&l.syncHealth, err) // under mu: before a rotation's fsync, which waits for syncing
		l.cond.Broadcast()
		l.mu.Unlock()
		cur.err = err
		close(cur.done)
	}
	l.syncMu.Unlock()
	<-b.done
	return b.err
}

// flushLoop is the FsyncInterval flusher.
func (l *Log) flushLoop(tick <-chan time.Time, stopTicker func()) {
	defer close(l.done)
	defer stopTicker()
	for {
		select {
		case <-l.stop:
			return
		case <-tick:
			l.flushDirty()
		}
	}
}

func (l *Log) flushDirty() {
	l.mu.Lock()
	if !l.dirty || l.syncing || l.f == nil {
		l.mu.Unlock()
		return
	}
	f := l.f
	l.syncing, l.dirty = true, false
	l.mu.Unlock()
	err := f.Sync()
	l.mu.Lock()
	l.syncing = false
	if err != nil {
		l.dirty = true // try again at the next tick
		err = fmt.Errorf("audit: fsync %s: %w", l.opts.Path, err)
	}
	setHealth(&l.syncHealth, err) // under mu, as in commit
	l.cond.Broadcast()
	l.mu.Unlock()
	l.tell(err)
}

// retire flushes (policy permitting) and closes the current file, and
// resolves the pending batch with the flush's result. Called with mu held
// and no fsync running. told: the error went to the pending batch, whose
// waiters each tell it as their record's loss.
func (l *Log) retire() (told bool, err error) {
	if l.f == nil {
		return false, nil
	}
	if l.opts.Fsync != FsyncNever && l.dirty {
		if err = l.f.Sync(); err != nil {
			err = fmt.Errorf("audit: fsync %s: %w", l.opts.Path, err)
		}
		setHealth(&l.syncHealth, err) // under mu, no other fsync running
	}
	if b := l.pending; b != nil {
		b.err, told = err, err != nil
		close(b.done)
		l.pending = nil
	}
	if cerr := l.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("audit: close %s: %w", l.opts.Path, cerr)
	}
	l.f, l.id, l.dirty = nil, nil, false
	return told, err
}

// retireUntold retires the file and returns the failure its pending
// batch's waiters will not tell: told once more, as a warning, a failed
// fsync that cost n records would count n+1 in the metrics.
func (l *Log) retireUntold() error {
	if told, err := l.retire(); !told {
		return err
	}
	return nil
}

// replaced reports whether Path no longer names the open file: someone
// moved or deleted it, and records written to it would vanish from the
// trail. It looks at most once per hooks.statEvery (replacedCheckEvery),
// but a replacement it has seen is not forgotten: until the file is
// retired, every call looks again (write may wait for an fsync between
// seeing it and acting on it).
func (l *Log) replaced() bool {
	if l.hooks.statEvery > 0 {
		now := l.hooks.clock()
		if now.Before(l.statDue) {
			return false
		}
		l.statDue = now.Add(l.hooks.statEvery)
	}
	fi, err := os.Stat(l.opts.Path)
	if err != nil || !os.SameFile(fi, l.id) {
		l.statDue = time.Time{}
		return true
	}
	return false
}

// Close flushes (policy permitting) and closes the trail, and stops the
// interval flusher. Appends after Close return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	l.mu.Lock()
	for l.syncing {
		l.cond.Wait()
	}
	told, err := l.retire()
	l.mu.Unlock()
	l.unlock()
	if !told {
		l.tell(err)
	}
	return err
}

// tell passes a failure on to Options.OnError.
func (l *Log) tell(err error) {
	if err != nil && !errors.Is(err, ErrClosed) && l.opts.OnError != nil {
		l.opts.OnError(err)
	}
}

// warn passes on a problem that did not cost a record, without changing
// the health.
func (l *Log) warn(err error) {
	if err != nil && l.opts.OnError != nil {
		l.opts.OnError(err)
	}
}
