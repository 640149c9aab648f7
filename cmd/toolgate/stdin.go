package main

import (
	"os"
	"syscall"
	"time"
)

// pollableStdin returns a copy of stdin (f) that the Go runtime polls, when
// stdin is a pipe or a socket (how MCP clients start a stdio server), and a
// function that closes the copy and puts stdin back in blocking mode; else
// f itself and a function that does nothing.
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
// The copy is a dup of stdin's descriptor: closing it leaves stdin open.
// Nonblocking mode belongs to the pipe's open file, which the client does
// not share (it holds the other end); a process that ran the gateway with
// its own stdin and reads it afterwards gets it back blocking.
func pollableStdin(f *os.File) (*os.File, func()) {
	unchanged := func() {}
	if f.SetReadDeadline(time.Time{}) == nil {
		return f, unchanged // already polled: it was nonblocking when the process started
	}
	info, err := f.Stat()
	if err != nil || info.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, unchanged // a terminal or a file: the poller cannot wait on it
	}
	fd, err := descriptor(f)
	if err != nil {
		return f, unchanged
	}
	dup, err := syscall.Dup(fd)
	if err != nil {
		return f, unchanged
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		_ = syscall.Close(dup)
		return f, unchanged
	}
	polled := os.NewFile(uintptr(dup), f.Name())
	if polled.SetReadDeadline(time.Time{}) != nil { // the poller refused it: read it blocking after all
		_ = polled.Close()
		_ = syscall.SetNonblock(fd, false)
		return f, unchanged
	}
	return polled, func() {
		_ = polled.Close()
		_ = syscall.SetNonblock(fd, false)
	}
}

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
