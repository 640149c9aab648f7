package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrCrash, returned by a BeforeRename hook, simulates the process dying
// between writing the temporary file and renaming it: WriteAtomic then
// leaves the temporary file behind, as a real crash would.
var ErrCrash = errors.New("simulated crash")

// tmpPrefix names the temporary files of path, so that ones left by a crash
// can be found and removed.
func tmpPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// WriteAtomic replaces path with data so that a reader (or a crash) sees
// either the old file or the new one, never a part: the data goes to a
// temporary file in the same directory, is flushed to disk, renamed over
// path, and the directory is flushed so the rename itself survives a power
// loss. The file keeps an existing file's permissions, or gets perm.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomicHook(path, data, perm, nil)
}

// WriteAtomicHook is WriteAtomic with beforeRename, when not nil, run
// between the flush and the rename (tests simulate failures and crashes
// there; see ErrCrash). An error from it aborts the write.
func WriteAtomicHook(path string, data []byte, perm fs.FileMode, beforeRename func(tmp string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil && !errors.Is(err, ErrCrash) {
			_ = os.Remove(tmp)
		}
	}()
	if st, statErr := os.Stat(path); statErr == nil {
		perm = st.Mode().Perm()
	}
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	if beforeRename != nil {
		if err = beforeRename(tmp); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// FollowLinks is where a write to path must go so that a symlinked state
// file stays a symlink: the final target, even one that does not exist yet
// (the first write through a dangling link creates it).
func FollowLinks(path string) string {
	for range 40 { // as many as the kernel follows
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(path), dest)
		}
		path = dest
	}
	return path
}

// SyncDir flushes a directory's entries (a rename or a new file in it) to
// disk; filesystems that cannot sync a directory are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) { // some filesystems cannot sync a directory
		return err
	}
	return nil
}

// CleanStale removes temporary files a crashed WriteAtomic of path left
// behind. Call it only under Lock, when no other writer can be mid-write.
func CleanStale(path string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(tmpPrefix(path))+"*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lockWait bounds how long Lock waits for another process's lock.
const lockWait = 10 * time.Second

// Lock takes an exclusive flock on <path>.lock (created with perm), so that
// processes sharing the file never interleave their read-change-write
// cycles: each re-reads the file under the lock. It waits up to 10 seconds
// for another holder and returns the unlock function. Errors read
// "lock <path>.lock: …".
func Lock(path string, perm fs.FileMode) (unlock func(), err error) {
	return lock(path, perm, lockWait)
}

// TryLock is Lock without waiting: it fails at once, with an error that
// wraps ErrLocked, when another holder has the lock. For files one process
// owns for its whole life (the audit trail), where waiting cannot help.
func TryLock(path string, perm fs.FileMode) (unlock func(), err error) {
	return lock(path, perm, 0)
}

// ErrLocked: another process holds the lock.
var ErrLocked = errors.New("another toolgate process holds it")

func lock(path string, perm fs.FileMode, wait time.Duration) (unlock func(), err error) {
	lp := path + ".lock"
	f, err := os.OpenFile(lp, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", lp, err)
		}
		if !time.Now().Before(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", lp, ErrLocked)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
