package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// fileVersion is the approvals file's format version.
const fileVersion = 1

// fileFormat is the approvals file:
//
//	{"version": 1, "requests": [{"id": "apr_…", "principal": "alice", "tool": "orders/refund_order",
//	  "args_hash": "<64 hex>", "args": {…}, "rule": "policy.csv:31", "state": "pending",
//	  "created_at": "…", "expires_at": "…"}, …]}
//
// Requests are kept oldest first. Timestamps are RFC 3339 with nanoseconds.
type fileFormat struct {
	Version  int       `json:"version"`
	Requests []Request `json:"requests"`
}

// readFile reads and checks the file. A missing file is an empty store; anything else that is not a
// complete, consistent approvals file is an error naming the file, never an empty store (that would
// forget denials and pending requests silently).
func readFile(path string) ([]Request, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return []Request{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("approvals file %s: %w", path, err)
	}
	reqs, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("approvals file %s: %w (fix, restore or remove it; toolgate never treats a damaged approvals file as empty)", path, err)
	}
	return reqs, nil
}

func parseFile(data []byte) ([]Request, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, expected %d", f.Version, fileVersion)
	}
	if f.Requests == nil {
		return nil, errors.New(`no "requests" list`)
	}
	seen := make(map[string]bool, len(f.Requests))
	for i, r := range f.Requests {
		if err := checkRequest(&r); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("requests[%d]: id %s appears twice", i, r.ID)
		}
		seen[r.ID] = true
	}
	return f.Requests, nil
}

func checkRequest(r *Request) error {
	switch {
	case !strings.HasPrefix(r.ID, "apr_") || len(r.ID) < 8:
		return fmt.Errorf("id: expected apr_ and random characters, got %q", clip(r.ID, 40))
	case r.Principal == "":
		return errors.New("no principal")
	case r.Tool == "":
		return errors.New("no tool")
	case r.ArgsHash == "":
		return errors.New("no args_hash")
	case r.CreatedAt.IsZero() || r.ExpiresAt.IsZero():
		return errors.New("created_at and expires_at are required")
	}
	if _, err := ParseState(string(r.State)); err != nil {
		return err
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// encodeFile renders the file: indented, no HTML escaping, ending in a newline.
func encodeFile(reqs []Request) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fileFormat{Version: fileVersion, Requests: reqs}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// tmpPrefix names the temporary files of path, so that ones left by a crash can be found and removed.
func tmpPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// writeAtomic replaces path with data so that a reader (or a crash) sees either the old file or the new
// one, never a part: temporary file in the same directory, fsync, rename, fsync of the directory. The
// file is created 0600 (it holds call arguments) and keeps an existing file's permissions.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	perm := fs.FileMode(0o600)
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
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// followLinks is where a write to path must go so that a symlinked file stays a symlink.
func followLinks(path string) string {
	for range 40 {
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
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// removeStaleTemps removes temporary files a crashed writer left behind. It runs only under the file
// lock, when no other writer can be mid-write.
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

// lockWait bounds how long an operation waits for another process's.
const lockWait = 10 * time.Second

// lockFile takes an exclusive flock on <path>.lock, so that processes sharing the file never interleave
// their read-change-write cycles. It returns the unlock function.
func lockFile(path string) (func(), error) {
	lp := path + ".lock"
	f, err := os.OpenFile(lp, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approvals lock %s: %w", lp, err)
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
			return nil, fmt.Errorf("approvals lock %s: %w (another toolgate process holds it)", lp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
