package pins

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolgate/toolgate/internal/dirwatch"
	"github.com/toolgate/toolgate/internal/statefile"
)

// watchDebounce is how long the lock file must be quiet after a change
// before Watch reloads it.
const watchDebounce = 250 * time.Millisecond

// Watch re-reads the lock file whenever it changes, until ctx ends; then it
// returns nil with no goroutine left behind. After each reload it calls
// onReload with Reload's error (nil: the store now holds the file's pins;
// otherwise the store kept the previous ones). onReload runs on Watch's
// goroutine.
//
// Like the policy watch, it watches the file's directory, not the file: the
// file is replaced by rename on every write (ours, and `toolgate pins
// approve`'s), which a watch on the file itself would not survive. Events
// for other names (the .lock file, temporary files) are ignored, and
// bursts are debounced. The gateway's own writes cause a reload too; it
// finds what the store already holds. In mode Off, Watch only waits for ctx.
func (s *Store) Watch(ctx context.Context, onReload func(error)) error {
	if s.mode == Off {
		<-ctx.Done()
		return nil
	}
	w, err := dirwatch.New()
	if err != nil {
		return fmt.Errorf("pins: cannot watch %s: %w", s.path, err)
	}
	defer w.Close()
	names := map[string]bool{}
	// The file, and the target of a symlinked one (writes replace the target).
	for _, p := range []string{s.path, statefile.FollowLinks(s.path)} {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("pins: cannot watch %s: %w", p, err)
		}
		dir := filepath.Dir(abs)
		if err := w.Add(dir); err != nil {
			return fmt.Errorf("pins: cannot watch directory %s: %w", dir, err)
		}
		names[abs] = true
		names[filepath.Join(dir, "..data")] = true // a Kubernetes ConfigMap swap
	}
	relevant := func(ev fsnotify.Event) bool {
		if ev.Op == fsnotify.Chmod {
			return false
		}
		p, err := filepath.Abs(ev.Name)
		return err == nil && names[p]
	}
	return s.watchLoop(ctx, w.Events, w.Errors, relevant, time.After, onReload)
}

var errWatcherClosed = errors.New("pins: the file watcher stopped")

// watchLoop is Watch without fsnotify, so tests can drive it with channels
// and a fake clock: every relevant event restarts the quiet period, and the
// reload happens when it ends. Watcher errors (an overflow may have lost an
// event) are reported to onReload and followed by a reload.
func (s *Store) watchLoop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error,
	relevant func(fsnotify.Event) bool, after func(time.Duration) <-chan time.Time, onReload func(error)) error {
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return errWatcherClosed
			}
			if relevant(ev) {
				quiet = after(watchDebounce)
			}
		case err, ok := <-errs:
			if !ok {
				return errWatcherClosed
			}
			onReload(fmt.Errorf("pins: file watcher: %w", err))
			quiet = after(watchDebounce)
		case <-quiet:
			quiet = nil
			onReload(s.Reload())
		}
	}
}
