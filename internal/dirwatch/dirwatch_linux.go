package dirwatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// mask is what a directory watch reports: no IN_MODIFY (each write), no
// IN_ATTRIB (chmod, touch), no access or open events.
const mask = unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// New returns a watcher with no directory yet.
func New() (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	events, errs := make(chan fsnotify.Event, 16), make(chan error, 1)
	w := &inotify{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, dirs: map[int]string{},
		events: events, errs: errs, stop: make(chan struct{}), done: make(chan struct{})}
	go w.read()
	return &Watcher{Events: events, Errors: errs, impl: w}, nil
}

// inotify reads one inotify descriptor through the runtime's poller, so
// Close interrupts a read that waits.
type inotify struct {
	f      *os.File
	fd     int
	mu     sync.Mutex
	dirs   map[int]string // watch descriptor -> directory
	events chan fsnotify.Event
	errs   chan error
	stop   chan struct{} // closed by Close: read sends nothing more
	done   chan struct{} // closed when read has returned
	closed sync.Once
}

func (w *inotify) Add(dir string) error {
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err != nil {
		return &os.PathError{Op: "watch", Path: dir, Err: err}
	}
	w.mu.Lock()
	w.dirs[wd] = dir
	w.mu.Unlock()
	return nil
}

func (w *inotify) Close() error {
	var err error
	w.closed.Do(func() {
		close(w.stop)
		err = w.f.Close()
		<-w.done
	})
	return err
}

// read turns what the descriptor says into events until Close.
func (w *inotify) read() {
	defer close(w.done)
	defer close(w.events)
	defer close(w.errs)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			w.send(nil, fmt.Errorf("inotify: %w", err))
			return
		}
		if !w.parse(buf[:n]) {
			return
		}
	}
}

// send delivers an event or an error, unless Close was called: a
// consumer that stopped reading must not keep read (and Close) waiting.
func (w *inotify) send(ev *fsnotify.Event, err error) bool {
	if ev != nil {
		select {
		case w.events <- *ev:
			return true
		case <-w.stop:
			return false
		}
	}
	select {
	case w.errs <- err:
		return true
	case <-w.stop:
		return false
	}
}

// parse sends one event per record in b; false once Close was called.
func (w *inotify) parse(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(raw.Len)
		if end > len(b) {
			return true // cannot happen: the kernel writes whole records
		}
		name := string(trimNUL(b[unix.SizeofInotifyEvent:end]))
		b = b[end:]
		if raw.Mask&unix.IN_Q_OVERFLOW != 0 {
			if !w.send(nil, errors.New("inotify: event queue overflowed; changes may have been missed")) {
				return false
			}
			continue
		}
		w.mu.Lock()
		dir, ok := w.dirs[int(raw.Wd)]
		w.mu.Unlock()
		if op := opOf(raw.Mask); ok && op != 0 {
			if !w.send(&fsnotify.Event{Name: filepath.Join(dir, name), Op: op}, nil) {
				return false
			}
		}
	}
	return true
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// opOf is fsnotify's name for what happened. A file written in place is
// reported as Write when closed.
func opOf(m uint32) fsnotify.Op {
	switch {
	case m&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		return fsnotify.Create
	case m&unix.IN_CLOSE_WRITE != 0:
		return fsnotify.Write
	case m&(unix.IN_DELETE|unix.IN_DELETE_SELF) != 0:
		return fsnotify.Remove
	case m&(unix.IN_MOVED_FROM|unix.IN_MOVE_SELF) != 0:
		return fsnotify.Rename
	}
	return 0
}
