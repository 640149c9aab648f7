package authz

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolgate/toolgate/internal/dirwatch"
)

// Watch reloads the policy when the model or the policy file changes, until ctx ends; then it
// returns nil, with its watcher closed and no goroutine left behind. It returns an error only
// when watching cannot start or the watcher fails for good.
//
// It watches the DIRECTORIES of both files, not the files: editors and config tools replace a
// file (write a temporary file, rename it over the old one), and a watch on the old file would
// go quiet after the first save. Events for other names in those directories are ignored,
// except Kubernetes' "..data" symlink swap (a ConfigMap volume update). On Linux a file written
// in place is seen when its writer closes it, and writes to other files there (the audit trail)
// wake nothing (package dirwatch). A burst of events (an editor's rename + create) is debounced:
// Watch reloads once the files have been quiet for the debounce interval (250 ms). A failed reload is handled as
// [Store.Reload] does: logged, counted, last good policy kept.
func (s *Store) Watch(ctx context.Context) error {
	w, err := dirwatch.New()
	if err != nil {
		return fmt.Errorf("authz: cannot watch the policy files: %w", err)
	}
	defer w.Close()

	names := map[string]bool{}
	var dirs []string
	for _, f := range []string{s.modelPath, s.policyPath} {
		abs, err := filepath.Abs(f)
		if err != nil {
			return fmt.Errorf("authz: cannot watch %s: %w", f, err)
		}
		names[abs] = true
		dir := filepath.Dir(abs)
		names[filepath.Join(dir, "..data")] = true
		if !contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("authz: cannot watch directory %s: %w", d, err)
		}
	}
	s.log.Info("watching the policy for changes", "dirs", strings.Join(dirs, ", "))
	if s.onWatching != nil {
		s.onWatching()
	}
	relevant := func(ev fsnotify.Event) bool {
		if ev.Op == fsnotify.Chmod {
			return false
		}
		abs, err := filepath.Abs(ev.Name)
		return err == nil && names[abs]
	}
	return s.watchLoop(ctx, w.Events, w.Errors, relevant)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

var errWatcherClosed = errors.New("authz: the file watcher stopped")

// watchLoop is Watch's event loop, separate from fsnotify so that tests can drive it with plain
// channels and a fake clock (s.after): every relevant event restarts the quiet period, and the
// reload happens when it ends.
func (s *Store) watchLoop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, relevant func(fsnotify.Event) bool) error {
	var quiet <-chan time.Time // nil: no change pending
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return errWatcherClosed
			}
			if relevant(ev) {
				quiet = s.after(s.debounce)
			}
		case err, ok := <-errs:
			if !ok {
				return errWatcherClosed
			}
			s.log.Warn("policy file watcher error; a change may have been missed (SIGHUP reloads)", "error", err.Error())
		case <-quiet:
			quiet = nil
			_ = s.Reload() // logged and counted by Reload
		}
	}
}
