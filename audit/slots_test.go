package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSlotPath(t *testing.T) {
	tests := []struct {
		path string
		n    int
		want string
	}{
		{"/var/log/toolgate.audit.log", 1, "/var/log/toolgate.audit.log"},
		{"/var/log/toolgate.audit.log", 2, "/var/log/toolgate.audit-2.log"},
		{"/var/log/toolgate.audit.log", 8, "/var/log/toolgate.audit-8.log"},
		{"audit", 3, "audit-3"},
		{"/a.b/audit", 2, "/a.b/audit-2"},
		{"/x/.audit", 2, "/x/.audit-2"},
	}
	for _, tt := range tests {
		if got := SlotPath(tt.path, tt.n); got != tt.want {
			t.Errorf("SlotPath(%q, %d) = %q, want %q", tt.path, tt.n, got, tt.want)
		}
	}
}

// A second Open of a trail another holder writes takes slot 2, a third
// slot 3; each is a chain of its own that verifies alone, however the
// writers' records interleave in time.
func TestSecondOpenOfHeldTrailTakesNextSlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.audit.log")
	a := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	b := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	c := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	want := []string{path, SlotPath(path, 2), SlotPath(path, 3)}
	for i, l := range []*Log{a, b, c} {
		if l.Path() != want[i] || l.Slot() != i+1 {
			t.Fatalf("Open #%d took %s (slot %d), want %s (slot %d)", i+1, l.Path(), l.Slot(), want[i], i+1)
		}
	}
	if filepath.Base(b.Path()) != "toolgate.audit-2.log" {
		t.Fatalf("slot 2 is %s", b.Path())
	}
	for i := 1; i <= 5; i++ { // interleaved, as three processes would write
		appendN(t, a, i, 1)
		appendN(t, b, 100+i, 1)
		if i%2 == 0 {
			appendN(t, c, 200+i, 1)
		}
	}
	for _, l := range []*Log{a, b, c} {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path string
		n    int
	}{{path, 5}, {SlotPath(path, 2), 5}, {SlotPath(path, 3), 2}} {
		rep := mustVerify(t, tc.path)
		if rep.Records != tc.n || rep.FirstSeq != 1 || rep.LastSeq != uint64(tc.n) || rep.MidChain {
			t.Errorf("%s: %+v, want its own chain of seq 1..%d", tc.path, rep, tc.n)
		}
	}
	trails, err := Trails(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(trails, want) {
		t.Errorf("Trails = %v, want %v", trails, want)
	}
}

// A slot its holder released is taken again by the next Open that needs
// one (the lowest free slot), and its chain continues: slots do not pile
// up one per process.
func TestReleasedSlotIsReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.audit.log")
	a := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	b := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	c := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	if c.Slot() != 3 {
		t.Fatalf("third Open took slot %d", c.Slot())
	}
	appendN(t, b, 1, 3)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	d := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	if d.Path() != SlotPath(path, 2) || d.Slot() != 2 {
		t.Fatalf("after slot 2 was released, Open took %s (slot %d), want %s", d.Path(), d.Slot(), SlotPath(path, 2))
	}
	appendN(t, d, 4, 2)
	d.Close()
	if rep := mustVerify(t, d.Path()); rep.Records != 5 || rep.FirstSeq != 1 || rep.LastSeq != 5 {
		t.Errorf("the reused slot: %+v, want one chain of seq 1..5", rep)
	}
	// The main file released: it comes first again.
	a.Close()
	e := openTest(t, Options{Path: path, Fsync: FsyncNever}, nil)
	if e.Path() != path || e.Slot() != 1 {
		t.Fatalf("with the file itself free, Open took %s (slot %d)", e.Path(), e.Slot())
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "toolgate.audit-*.log"))
	if len(matches) != 2 {
		t.Errorf("slot files %v, want slots 2 and 3 only", matches)
	}
}

// With every slot held, Open fails with an error naming the file and how
// many slots it has; Slots 1 means no slot at all beside the file.
func TestAllSlotsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.audit.log")
	for range 3 {
		openTest(t, Options{Path: path, Slots: 3}, nil)
	}
	l, err := Open(Options{Path: path, Slots: 3})
	if err == nil {
		l.Close()
		t.Fatal("a fourth Open with 3 slots succeeded")
	}
	for _, want := range []string{path, "3 slots", SlotPath(path, 3), "audit.file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(SlotPath(path, 4)); !os.IsNotExist(err) {
		t.Errorf("a slot past the limit was created (%v)", err)
	}

	single := filepath.Join(t.TempDir(), "a.log")
	openTest(t, Options{Path: single, Slots: 1}, nil)
	if l, err := Open(Options{Path: single, Slots: 1}); err == nil {
		l.Close()
		t.Fatal("Slots 1: a second Open succeeded")
	} else if !strings.Contains(err.Error(), single) || !strings.Contains(err.Error(), "another toolgate process") {
		t.Errorf("Slots 1: %v", err)
	}
	if _, err := Open(Options{Path: single, Slots: -1}); err == nil {
		t.Error("Slots -1 accepted")
	}
}

// Trails finds the file's slots on disk (also one left with only rotated
// files), and nothing else that looks alike; Files lists a trail's files
// oldest first.
func TestTrailsAndFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.audit.log")
	for _, name := range []string{
		"toolgate.audit.log", "toolgate.audit.log.1", "toolgate.audit.log.2", "toolgate.audit.log.10", "toolgate.audit.log.lock",
		"toolgate.audit-2.log", "toolgate.audit-2.log.lock",
		"toolgate.audit-4.log.1",    // slot 4: only a rotated file
		"toolgate.audit-3.log.lock", // slot 3: a lock file but no trail
		"toolgate.audit-02.log", "toolgate.audit-x.log", "toolgate.audit-1.log", "toolgate.audit-5.logx", "other.log",
		"toolgate.audit.log.01",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	trails, err := Trails(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{path, SlotPath(path, 2), SlotPath(path, 4)}; !slices.Equal(trails, want) {
		t.Errorf("Trails = %v, want %v", trails, want)
	}
	files, err := Files(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{path + ".10", path + ".2", path + ".1", path}; !slices.Equal(files, want) {
		t.Errorf("Files = %v, want %v", files, want)
	}
	if files, _ := Files(SlotPath(path, 4)); !slices.Equal(files, []string{SlotPath(path, 4) + ".1"}) {
		t.Errorf("Files of slot 4 = %v", files)
	}
	if trails, err := Trails(filepath.Join(t.TempDir(), "none.log")); err != nil || len(trails) != 0 {
		t.Errorf("no trail: %v, %v", trails, err)
	}
}
