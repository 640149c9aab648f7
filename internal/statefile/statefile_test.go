package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func temps(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(path), tmpPrefix(path)+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteAtomicReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := WriteAtomic(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "two" {
		t.Fatalf("content %q, want %q", got, "two")
	}
	if left := temps(t, path); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestWriteAtomicPerm(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh")
	if err := WriteAtomic(fresh, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o600 {
		t.Fatalf("new file mode %v, want 0600", st.Mode().Perm())
	}
	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(existing, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(existing); st.Mode().Perm() != 0o640 {
		t.Fatalf("replaced file mode %v, want the old 0640", st.Mode().Perm())
	}
}

// A failure before the rename leaves the old file and no temporary file; a
// simulated crash leaves the temporary file, which CleanStale removes.
func TestWriteAtomicFailureAndCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := WriteAtomic(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	disk := errors.New("disk full")
	if err := WriteAtomicHook(path, []byte("new"), 0o644, func(string) error { return disk }); !errors.Is(err, disk) {
		t.Fatalf("error %v, want %v", err, disk)
	}
	if got := read(t, path); got != "old" || len(temps(t, path)) != 0 {
		t.Fatalf("after a failed write: %q, temps %v", got, temps(t, path))
	}
	if err := WriteAtomicHook(path, []byte("new"), 0o644, func(string) error { return ErrCrash }); !errors.Is(err, ErrCrash) {
		t.Fatalf("error %v, want %v", err, ErrCrash)
	}
	if got := read(t, path); got != "old" || len(temps(t, path)) != 1 {
		t.Fatalf("after a crash: %q, temps %v", got, temps(t, path))
	}
	other := filepath.Join(filepath.Dir(path), "other.json")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	CleanStale(path)
	if left := temps(t, path); len(left) != 0 {
		t.Fatalf("CleanStale left %v", left)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("CleanStale removed an unrelated file: %v", err)
	}
}

func TestWriteAtomicThroughFollowLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if got := FollowLinks(link); got != target {
		t.Fatalf("FollowLinks = %s, want %s", got, target)
	}
	if err := WriteAtomic(FollowLinks(link), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	if got := read(t, link); got != "x" {
		t.Fatalf("content through the link %q", got)
	}
}

// While one holder has the lock, nobody else gets it; a waiting Lock gets
// it once the holder unlocks.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	unlock, err := Lock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path + ".lock"); st.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode %v, want 0600", st.Mode().Perm())
	}

	// A second open file description cannot take it now.
	f, err := os.Open(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second flock while held: %v, want EWOULDBLOCK", err)
	}

	var released atomic.Bool
	started := make(chan struct{})
	acquired := make(chan error)
	go func() {
		close(started)
		unlock2, err := Lock(path, 0o600)
		if err == nil {
			if !released.Load() {
				err = errors.New("second Lock succeeded while the first was held")
			}
			unlock2()
		}
		acquired <- err
	}()
	<-started
	released.Store(true)
	unlock()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
}
