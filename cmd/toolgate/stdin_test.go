package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// blockingPipe is a pipe whose read end is a blocking *os.File, as a
// process's inherited stdin is (os.Pipe's are polled already).
func blockingPipe(t *testing.T) (stdin, client *os.File) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	return blockingEnds(t, fds)
}

// blockingSocketPair is a connected pair of Unix sockets; the first is a
// blocking *os.File.
func blockingSocketPair(t *testing.T) (stdin, client *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return blockingEnds(t, fds)
}

// blockingEnds wraps two descriptors as files closed when the test ends;
// the first must be one the runtime does not poll.
func blockingEnds(t *testing.T, fds [2]int) (stdin, client *os.File) {
	t.Helper()
	stdin, client = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	t.Cleanup(func() { stdin.Close(); client.Close() })
	if polled(stdin) {
		t.Fatal("the test's stdin is polled already")
	}
	return stdin, client
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	fd, err := descriptor(f)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := fcntlFlags(fd)
	if err != nil {
		t.Fatal(err)
	}
	return flags&syscall.O_NONBLOCK != 0
}

func closeOnExec(t *testing.T, f *os.File) bool {
	t.Helper()
	fd, err := descriptor(f)
	if err != nil {
		t.Fatal(err)
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	return flags&syscall.FD_CLOEXEC != 0
}

func fcntlFlags(fd int) (int, error) {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(flags), nil
}

// A blocking pipe comes back as a polled copy that reads what the client
// writes and honours a read deadline; restoring closes the copy, leaves
// stdin open, and puts it back in blocking mode.
func TestPollableStdinPipe(t *testing.T) {
	stdin, client := blockingPipe(t)
	polled, restore := pollableStdin(stdin)
	t.Cleanup(restore) // before blockingPipe's cleanup closes stdin; restore runs once
	if polled == stdin {
		t.Fatal("a blocking pipe came back unchanged")
	}
	if !nonblocking(t, stdin) {
		t.Fatal("stdin's pipe is not in nonblocking mode")
	}
	if !closeOnExec(t, polled) {
		t.Fatal("the copy is not close-on-exec: an upstream started now would inherit the client's requests")
	}
	if err := polled.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatalf("the copy is not polled: %v", err)
	}
	buf := make([]byte, 16)
	if _, err := polled.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read with nothing written: %v, want the deadline", err)
	}
	_ = polled.SetReadDeadline(time.Time{})
	if _, err := client.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := polled.Read(buf); err != nil || string(buf[:n]) != "{}\n" {
		t.Fatalf("read %q, %v; want the client's line", buf[:n], err)
	}

	// Restoring while the server's reader may be waiting on the copy (the
	// way the gateway stops) ends that read, whether it was waiting yet or
	// starts after; stdin stays open.
	read := make(chan error, 1)
	go func() {
		_, err := polled.Read(buf)
		read <- err
	}()
	restore()
	if err := <-read; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a read waiting on the copy when it was restored: %v, want closed", err)
	}
	if nonblocking(t, stdin) {
		t.Fatal("stdin is still nonblocking after restore")
	}
	if _, err := client.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(stdin, buf[:6]); err != nil || string(buf[:n]) != "after\n" {
		t.Fatalf("stdin after restore read %q, %v", buf[:n], err)
	}
}

// A socket stdin (socat, a launcher that hands over one end of a
// socketpair) is polled like a pipe, and its end of input is still io.EOF.
func TestPollableStdinSocket(t *testing.T) {
	stdin, client := blockingSocketPair(t)
	polled, restore := pollableStdin(stdin)
	t.Cleanup(restore)
	if polled == stdin || polled.SetReadDeadline(time.Time{}) != nil {
		t.Fatal("a blocking socket did not come back polled")
	}
	if _, err := client.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	got, err := io.ReadAll(polled)
	if err != nil || string(got) != "{}\n" {
		t.Fatalf("read %q, %v; want the line and then io.EOF", got, err)
	}
}

// When stdin is also stdout (one socket for both, as inetd gives), making
// it nonblocking would make a write of a large answer fail half-way with
// EAGAIN: it is left alone.
func TestPollableStdinSharedWithStdout(t *testing.T) {
	stdin, _ := blockingSocketPair(t)
	fd, err := descriptor(stdin)
	if err != nil {
		t.Fatal(err)
	}
	dupFD, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.NewFile(uintptr(dupFD), "stdout")
	defer stdout.Close()
	_, other := blockingPipe(t)
	got, restore := pollableStdin(stdin, other, stdout)
	defer restore()
	if got != stdin || nonblocking(t, stdin) {
		t.Fatalf("stdin shared with stdout: got a copy %v, nonblocking %v; want it left alone", got != stdin, nonblocking(t, stdin))
	}
}

// A regular file (or a terminal) cannot be polled: it comes back as it
// is; so does a pipe that is polled already.
func TestPollableStdinLeavesTheRest(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"a regular file": file, "a polled pipe": r} {
		got, restore := pollableStdin(f)
		restore()
		if got != f {
			t.Errorf("%s: got a copy, want it unchanged", name)
		}
	}
	// What serve asks to decide the processors: a stdin polled from the
	// start counts as polled, a regular file as read blocking.
	if !polled(r) || polled(file) {
		t.Errorf("polled: pipe %v, regular file %v; want true, false", polled(r), polled(file))
	}
	if nonblocking(t, file) {
		t.Error("the regular file was made nonblocking")
	}
}
