// Package dirwatch watches directories for the files in them being written
// and closed, created, renamed or removed, and not for every write: the
// policy and pin watchers watch the directories that hold their files
// (editors replace a file by rename, which a watch on the file would not
// survive), and the audit trail usually sits in the same directory. With
// fsnotify, whose Linux watches always include IN_MODIFY, every audit
// record woke both watchers (and made the kernel queue two events): 2% of
// the gateway's CPU under load, for events they then ignored.
//
// On Linux it asks inotify for close-after-write, create, move and delete
// only, so a file written in place is seen once, when its writer closes it
// (also the moment it is complete). Elsewhere it is fsnotify.
package dirwatch

import "github.com/fsnotify/fsnotify"

// Watcher delivers events for the directories added to it, in the shape
// fsnotify gives them (Name is the directory joined with the file's name).
// Events and Errors are closed after Close.
type Watcher struct {
	Events <-chan fsnotify.Event
	Errors <-chan error
	impl   watcher
}

type watcher interface {
	Add(dir string) error
	Close() error
}

// Add starts watching dir (not its subdirectories).
func (w *Watcher) Add(dir string) error { return w.impl.Add(dir) }

// Close stops watching; it returns once no more events will be sent.
func (w *Watcher) Close() error { return w.impl.Close() }

// fsnotifyWatcher is the portable implementation.
func fsnotifyWatcher() (*Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &Watcher{Events: w.Events, Errors: w.Errors, impl: w}, nil
}
