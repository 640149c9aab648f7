//go:build !linux

package dirwatch

// New returns a watcher with no directory yet.
func New() (*Watcher, error) { return fsnotifyWatcher() }
