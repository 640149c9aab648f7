package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/statefile"
)

// DefaultSlots is how many trails one audit file may have when
// Options.Slots is zero: the file itself and its slots -2 … -8.
const DefaultSlots = 8

// SlotPath is the name of the n-th trail of the audit file at path: path
// itself for n <= 1, else path with "-n" inserted before its extension
// (toolgate.audit.log, toolgate.audit-2.log, toolgate.audit-3.log, …).
func SlotPath(path string, n int) string {
	if n <= 1 {
		return path
	}
	stem, ext := splitExt(path)
	return stem + "-" + strconv.Itoa(n) + ext
}

// splitExt splits path before the extension of its last element (none for
// a name that is all extension, like ".audit").
func splitExt(path string) (stem, ext string) {
	base := filepath.Base(path)
	if ext = filepath.Ext(base); ext == base {
		ext = ""
	}
	return strings.TrimSuffix(path, ext), ext
}

// lockSlot takes the first trail of o.Path no other process holds: the
// file itself, else slot 2, 3, … up to o.Slots. It returns the trail, its
// slot number and the function that releases it.
func lockSlot(o Options) (path string, slot int, unlock func(), err error) {
	for n := 1; n <= o.Slots; n++ {
		p := SlotPath(o.Path, n)
		unlock, err := statefile.TryLock(p, 0o600)
		if errors.Is(err, statefile.ErrLocked) {
			continue
		}
		if err != nil {
			return "", 0, nil, fmt.Errorf("audit: %w", err)
		}
		return p, n, unlock, nil
	}
	if o.Slots == 1 {
		return "", 0, nil, fmt.Errorf("audit: %s is written by another toolgate process, and this one may not "+
			"take a trail of its own beside it (1 slot); give each gateway process its own audit.file", o.Path)
	}
	return "", 0, nil, fmt.Errorf("audit: %s and its other %d slot(s) (%s … %s) are all written by other live toolgate "+
		"processes (%d slots in all); stop one of them, or give this gateway its own audit.file",
		o.Path, o.Slots-1, SlotPath(o.Path, 2), SlotPath(o.Path, o.Slots), o.Slots)
}

// Trails lists the trails that belong to the audit file at path, each by
// the name of its newest file: path itself, then its slots in slot order,
// each only when it has a file (its newest or a rotated one). It finds
// every slot on disk, whatever Options.Slots the writers had.
func Trails(path string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	base := filepath.Base(path)
	stem, ext := splitExt(base)
	slots := map[int]bool{}
	for _, e := range ents {
		name := e.Name()
		if name == base || isRotated(name, base) {
			slots[1] = true
			continue
		}
		rest, ok := strings.CutPrefix(name, stem+"-")
		if !ok {
			continue
		}
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i < 0 {
			i = len(rest)
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n < 2 || strconv.Itoa(n) != rest[:i] {
			continue
		}
		if slot := stem + "-" + rest[:i] + ext; name == slot || isRotated(name, slot) {
			slots[n] = true
		}
	}
	out := make([]string, 0, len(slots))
	for _, n := range slices.Sorted(maps.Keys(slots)) {
		out = append(out, SlotPath(path, n))
	}
	return out, nil
}

// isRotated reports whether name is one of base's rotated files: base.1,
// base.2, … as rotation names them.
func isRotated(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base+".")
	n, err := strconv.Atoi(rest)
	return ok && err == nil && n >= 1 && strconv.Itoa(n) == rest
}

// Files lists the files of the trail whose newest file is path, oldest
// first (path.N … path.1, path), as Verify takes them; only those that
// exist.
func Files(path string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	base := filepath.Base(path)
	var nums []int
	for _, e := range ents {
		if isRotated(e.Name(), base) {
			n, _ := strconv.Atoi(strings.TrimPrefix(e.Name(), base+"."))
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	slices.Reverse(nums)
	var out []string
	for _, n := range nums {
		out = append(out, rotated(path, n))
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}
