package dirwatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// next is the next event, failing the test when none comes in time (a
// guard against a hang, not a synchronisation).
func next(t *testing.T, w *Watcher) fsnotify.Event {
	t.Helper()
	select {
	case ev := <-w.Events:
		return ev
	case err := <-w.Errors:
		t.Fatalf("watch error: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return fsnotify.Event{}
}

func watch(t *testing.T, dir string) *Watcher {
	t.Helper()
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Writes to a file that stays open (an audit trail) make no event at all:
// the first event is the policy file's, when its writer closes it.
func TestWritesToAnOpenFileAreNotEvents(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.csv")
	write(t, policy, "p, a, b\n")
	trail, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer trail.Close()
	w := watch(t, dir)
	for range 200 {
		if _, err := trail.WriteString("{\"record\":1}\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(t, policy, "p, a, c\n")
	if ev := next(t, w); ev.Name != policy || ev.Op != fsnotify.Write {
		t.Fatalf("first event %v, want the policy written", ev)
	}
}

// What editors and tools do to a file arrives with the name and the op
// the watchers look for.
func TestReplaceAndRemove(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.csv")
	write(t, policy, "v1\n")
	w := watch(t, dir)

	tmp := filepath.Join(dir, ".policy.csv.tmp")
	write(t, tmp, "v2\n")
	if err := os.Rename(tmp, policy); err != nil {
		t.Fatal(err)
	}
	want := []fsnotify.Event{{Name: tmp, Op: fsnotify.Create}, {Name: tmp, Op: fsnotify.Write},
		{Name: tmp, Op: fsnotify.Rename}, {Name: policy, Op: fsnotify.Create}}
	for _, wantEv := range want {
		if ev := next(t, w); ev != wantEv {
			t.Fatalf("event %v, want %v", ev, wantEv)
		}
	}
	if err := os.Remove(policy); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Name != policy || ev.Op != fsnotify.Remove {
		t.Fatalf("event %v, want the policy removed", ev)
	}
}

// Close returns even when nobody reads the events, and closes both
// channels (goleak checks that the reader is gone).
func TestCloseWithoutReading(t *testing.T) {
	dir := t.TempDir()
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 100 { // more than the event buffer holds
		write(t, filepath.Join(dir, "f"), string(rune('a'+i%26)))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for range w.Events {
	}
	if _, open := <-w.Errors; open {
		t.Fatal("Errors still open after Close")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestAddMissingDirectory(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	missing := filepath.Join(t.TempDir(), "nope")
	if err := w.Add(missing); err == nil {
		t.Fatal("Add of a missing directory succeeded")
	} else if !os.IsNotExist(err) {
		t.Fatalf("error %v, want not-exist", err)
	}
}
