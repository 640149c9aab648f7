package main

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollableStdin returns a copy of stdin (f) that the Go runtime polls, when
// stdin is a pipe or a socket (how MCP clients start a stdio server), and a
// function that closes the copy and puts stdin back in blocking mode (it
// may be called more than once); else f itself and a function that does
// nothing. shared are the files that must stay blocking (stdout, stderr):
// when stdin is one of them (a socket an inetd-style launcher gives as
// both), it is left alone.
//
// Why: Go reads a stdin it inherited in blocking mode (os.Stdin) with a
// read system call that holds a thread, and that thread the processor it
// ran on, while the client is quiet; a call's answer from the upstream
// then waits for the runtime to take that processor back. Polled, the
// reader waits like a network connection and holds nothing. With the
// gateway on one processor (leaveCPUForUpstreams, 2 CPUs) one caller's p50
// over stdio was 1.44-1.69 times the relay's with blocking reads and
// 0.86-1.07 polled, and 16 callers got 25-34% more calls a second than the
// relay.
//
// Nonblocking mode belongs to the open pipe or socket, not to the
// descriptor: the client holds the other end and does not see it, but a
// process that handed the gateway its own stdin (a wrapper that did not
// exec) sees it nonblocking until the gateway exits, and after that too if
// the gateway is killed before restoring it.
func pollableStdin(f *os.File, shared ...*os.File) (*os.File, func()) {
	unchanged := func() {}
	if polled(f) {
		return f, unchanged // it was nonblocking when the process started
	}
	info, err := f.Stat()
	if err != nil || info.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, unchanged // a terminal or a file: the poller cannot wait on it
	}
	for _, other := range shared {
		if o, err := other.Stat(); err != nil || os.SameFile(info, o) {
			return f, unchanged // a write to it would fail with EAGAIN instead of waiting
		}
	}
	fd, err := descriptor(f)
	if err != nil {
		return f, unchanged
	}
	// The copy is close-on-exec from the start: an upstream started at the
	// same moment must not inherit the client's requests.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return f, unchanged
	}
	if err := syscall.SetNonblock(dup, true); err != nil {
		_ = syscall.Close(dup)
		return f, unchanged
	}
	copied := os.NewFile(uintptr(dup), f.Name())
	if !polled(copied) { // the poller refused it: read it blocking after all
		_ = copied.Close()
		_ = syscall.SetNonblock(fd, false)
		return f, unchanged
	}
	var once sync.Once
	return copied, func() {
		once.Do(func() {
			_ = copied.Close() // a read blocked on it ends with os.ErrClosed
			_ = syscall.SetNonblock(fd, false)
		})
	}
}

// polled reports whether the runtime polls f: only such a file takes a
// deadline.
func polled(f *os.File) bool { return f.SetReadDeadline(time.Time{}) == nil }

// descriptor is f's file descriptor, read without File.Fd (which would
// put a polled file back in blocking mode).
func descriptor(f *os.File) (int, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	fd := -1
	if err := raw.Control(func(d uintptr) { fd = int(d) }); err != nil {
		return 0, err
	}
	return fd, nil
}
