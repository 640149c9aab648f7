package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// fileVersion is the lock file's format version.
const fileVersion = 1

// fileFormat is the lock file: a version and one entry per canonical tool
// ID. encoding/json writes map keys sorted, so the file is stable.
type fileFormat struct {
	Version int              `json:"version"`
	Tools   map[string]Entry `json:"tools"`
}

var (
	// idRe is <server>/<tool>: a server name as config allows it, and any
	// non-empty upstream tool name.
	idRe   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}/.+$`)
	hashRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// readFile reads and checks the lock file. A missing file is an empty set of
// pins; anything else that is not a complete, consistent lock file is an
// error naming the file, never an empty set: an empty set would trust every
// tool again.
func readFile(path string) (map[string]Entry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins file %s: %w", path, err)
	}
	m, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("pins file %s: %w (fix or restore it; toolgate never treats a damaged pins file as empty)", path, err)
	}
	return m, nil
}

func parseFile(data []byte) (map[string]Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	// The strict parser first: it refuses duplicate keys, which
	// encoding/json would silently resolve to the last one.
	if _, err := CanonicalJSON(data); err != nil {
		return nil, err
	}
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, expected %d", f.Version, fileVersion)
	}
	if f.Tools == nil {
		return nil, errors.New(`no "tools" object`)
	}
	for id, e := range f.Tools {
		if err := checkEntry(id, &e); err != nil {
			return nil, fmt.Errorf("tools[%q]: %w", id, err)
		}
		f.Tools[id] = e
	}
	return f.Tools, nil
}

// checkEntry verifies one entry and replaces its definition with the
// canonical bytes, so that entries compare and hash the same however the
// file was indented.
func checkEntry(id string, e *Entry) error {
	if !idRe.MatchString(id) {
		return errors.New("expected a tool ID <server>/<tool>")
	}
	if !hashRe.MatchString(e.Hash) {
		return fmt.Errorf("hash: expected sha256: and 64 lowercase hex digits, got %q", clip(e.Hash, 80))
	}
	if len(e.Definition) == 0 {
		return errors.New("no definition")
	}
	d, err := ParseDefinition(e.Definition)
	if err != nil {
		return err
	}
	canon, err := d.Canonical()
	if err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	if h := hashOf(canon); h != e.Hash {
		return fmt.Errorf("hash %s does not match its definition (%s); was it edited by hand?", e.Hash, h)
	}
	if wantID := strings.SplitN(id, "/", 2)[1]; d.Name != wantID {
		return fmt.Errorf("definition names tool %q, not %q", clip(d.Name, 80), clip(wantID, 80))
	}
	e.Definition = canon
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// encodeFile renders the lock file: indented, keys sorted, no HTML escaping
// (a description's <IMPORTANT> stays readable), ending in a newline.
func encodeFile(m map[string]Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fileFormat{Version: fileVersion, Tools: m}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// errCrash is returned by a test hook to simulate the process dying between
// writing the temporary file and renaming it: nothing is cleaned up.
var errCrash = errors.New("simulated crash")

// tmpPrefix names the temporary files of path, so that ones left by a crash
// can be found and removed.
func tmpPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// writeAtomic replaces path with data so that a reader (or a crash) sees
// either the old file or the new one, never a part: the data goes to a
// temporary file in the same directory, is flushed to disk, renamed over
// path, and the directory is flushed so the rename itself survives a power
// loss. beforeRename, when set, runs between the flush and the rename
// (tests simulate crashes there). The file keeps the old file's
// permissions, or gets 0644.
func writeAtomic(path string, data []byte, beforeRename func(tmp string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil && !errors.Is(err, errCrash) {
			_ = os.Remove(tmp)
		}
	}()
	perm := fs.FileMode(0o644)
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
	return syncDir(dir)
}

// followLinks is where a write to path must go so that a symlinked lock
// file stays a symlink: the final target, even one that does not exist
// yet (the first write through a dangling link creates it).
func followLinks(path string) string {
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

func syncDir(dir string) error {
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

// removeStaleTemps removes temporary files a crashed writer left behind. It
// runs only under the file lock, when no other writer can be mid-write.
func removeStaleTemps(path string) {
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

// lockWait bounds how long a writer waits for another process's write.
const lockWait = 10 * time.Second

// lockFile takes an exclusive flock on <path>.lock, so that the gateway and
// `toolgate pins approve` never interleave their read-merge-write cycles:
// each re-reads the file under the lock, so neither overwrites what the
// other wrote. It returns the unlock function.
func lockFile(path string) (func(), error) {
	lp := path + ".lock"
	f, err := os.OpenFile(lp, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pins lock %s: %w", lp, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("pins lock %s: %w (another toolgate process holds it)", lp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
