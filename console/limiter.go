package console

import (
	"sync"
	"time"
)

// The sign-in limit: after maxFailures failed sign-ins from one address within failureWindow, that
// address's sign-ins are refused until the window ends. Keys are long random strings, so this is not
// what keeps them from being guessed; it keeps a script from hammering the page and the log.
const (
	maxFailures   = 5
	failureWindow = 5 * time.Minute
	// maxLimited bounds the addresses tracked. When it is reached and no window has ended, new
	// addresses share one overflow bucket: under a flood from many addresses sign-in slows for
	// everyone rather than the memory growing without end.
	maxLimited = 4096
)

type window struct {
	start    time.Time
	failures int
}

// limiter counts failed sign-ins per remote address, in bounded memory.
type limiter struct {
	mu sync.Mutex
	m  map[string]*window
}

func newLimiter() *limiter { return &limiter{m: map[string]*window{}} }

// blocked reports whether addr may not try now, and until when.
func (l *limiter) blocked(addr string, now time.Time) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.lookup(addr, now, false)
	if w == nil || w.failures < maxFailures {
		return false, time.Time{}
	}
	return true, w.start.Add(failureWindow)
}

// fail counts a failed sign-in from addr.
func (l *limiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lookup(addr, now, true).failures++
}

// lookup returns addr's current window (nil if none and !create), dropping ended windows. An
// address that finds the table full (after ended windows are dropped) uses the overflow bucket.
func (l *limiter) lookup(addr string, now time.Time, create bool) *window {
	for _, k := range []string{addr, overflowKey} {
		if w := l.m[k]; w != nil && now.Sub(w.start) >= failureWindow {
			delete(l.m, k)
		}
	}
	if w := l.m[addr]; w != nil {
		return w
	}
	if len(l.m) >= maxLimited {
		for k, w := range l.m {
			if now.Sub(w.start) >= failureWindow {
				delete(l.m, k)
			}
		}
	}
	if len(l.m) >= maxLimited {
		addr = overflowKey
		if w := l.m[addr]; w != nil {
			return w
		}
	}
	if !create {
		return nil
	}
	w := &window{start: now}
	l.m[addr] = w
	return w
}

// overflowKey is the bucket of addresses that find the table full; it is never a real address.
const overflowKey = "\x00overflow"

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
