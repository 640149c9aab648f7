package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/statefile"
)

// FileMode is the credentials file's and its lock file's mode: the data is sealed, but who holds a
// credential for which upstream is not for other users of the host either.
const FileMode fs.FileMode = 0o600

// fileVersion is the credentials file's format version.
const fileVersion = 1

// fileFormat is the credentials file (sealed is base64 of a sealed record, see Keyring):
//
//	{"version": 1, "credentials": [{"principal": "alice", "upstream": "orders", "kind": "secret",
//	  "updated": "…", "expires": "…", "source": "operator", "sealed": "AQ…"}, …]}
type fileFormat struct {
	Version     int          `json:"version"`
	Credentials []fileRecord `json:"credentials"`
	// Used are the single-use tokens taken (TakeOnce), until they expire: {"id": "…", "until": "…"}.
	Used []fileUsed `json:"used,omitempty"`
}

type fileUsed struct {
	ID    string    `json:"id"`
	Until time.Time `json:"until"`
}

type fileRecord struct {
	Principal string    `json:"principal"`
	Upstream  string    `json:"upstream"`
	Kind      Kind      `json:"kind"`
	Updated   time.Time `json:"updated"`
	Expires   time.Time `json:"expires,omitzero"`
	Source    string    `json:"source,omitempty"`
	Sealed    []byte    `json:"sealed"`
}

func (r fileRecord) entry() Entry {
	return Entry{Key: Key{Principal: r.Principal, Upstream: r.Upstream, Kind: r.Kind}, Updated: r.Updated, Expires: r.Expires, Source: r.Source}
}

func recordOf(e Entry, sealed []byte) fileRecord {
	return fileRecord{Principal: e.Principal, Upstream: e.Upstream, Kind: e.Kind, Updated: e.Updated, Expires: e.Expires,
		Source: e.Source, Sealed: slices.Clone(sealed)}
}

// File is the Backend of one gateway (or several on one host): a JSON file, written atomically with
// mode 0600 under an exclusive lock on <file>.lock, so that the gateway and `toolgate credentials`
// never lose each other's writes. Reads take no lock (a reader sees the old file or the new, never a
// part) and parse the file again only when it changed (its size, times or inode), so a call costs one
// stat.
type File struct {
	path string

	mu     sync.Mutex
	stamp  fileStamp
	byKey  map[Key]fileRecord
	loaded bool
}

type fileStamp struct {
	size      int64
	mtime     time.Time
	ino       uint64
	ctimeSec  int64
	ctimeNsec int64
}

var _ Backend = (*File)(nil)

// OpenFile opens the credentials file at path (a missing file is an empty store, created at the first
// write). An existing file that other users may read, or that is not a complete credentials file, is
// an error naming it.
func OpenFile(path string) (*File, error) {
	f := &File{path: statefile.FollowLinks(path)}
	if st, err := os.Stat(filepath.Dir(f.path)); err != nil || !st.IsDir() {
		// Found now rather than at the first user's credential.
		return nil, fmt.Errorf("credentials file %s: its directory %s does not exist", path, filepath.Dir(f.path))
	}
	if st, err := os.Stat(f.path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials file %s: mode %#o lets other users read it; expected 0600 (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	if _, err := f.records(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the file.
func (f *File) Path() string { return f.path }

// records is the file's records by key, read again when the file changed.
func (f *File) records() (map[Key]fileRecord, error) {
	stamp, exists, err := stampOf(f.path)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && stamp == f.stamp {
		return f.byKey, nil
	}
	byKey := map[Key]fileRecord{}
	if exists {
		if byKey, _, err = readRecords(f.path); err != nil {
			return nil, err
		}
	}
	f.byKey, f.stamp, f.loaded = byKey, stamp, true
	return byKey, nil
}

func stampOf(path string) (fileStamp, bool, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, false, nil
	}
	if err != nil {
		return fileStamp{}, false, err
	}
	s := fileStamp{size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.ino, s.ctimeSec, s.ctimeNsec = sys.Ino, sys.Ctim.Sec, sys.Ctim.Nsec
	}
	return s, true, nil
}

// readRecords reads the file's records by key and its used single-use tokens.
func readRecords(path string) (map[Key]fileRecord, map[string]time.Time, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[Key]fileRecord{}, map[string]time.Time{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	byKey, used, err := parseFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("credentials file %s: %w (restore it from a backup or remove it; toolgate never treats a damaged credentials file as empty)", path, err)
	}
	return byKey, used, nil
}

func parseFile(data []byte) (map[Key]fileRecord, map[string]time.Time, error) {
	var ff fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ff); err != nil {
		return nil, nil, err
	}
	if dec.More() {
		return nil, nil, errors.New("data after the JSON object")
	}
	if ff.Version != fileVersion {
		return nil, nil, fmt.Errorf("version %d, expected %d", ff.Version, fileVersion)
	}
	byKey := make(map[Key]fileRecord, len(ff.Credentials))
	for i, r := range ff.Credentials {
		k := r.entry().Key
		switch {
		case r.Upstream == "" || r.Kind == "":
			return nil, nil, fmt.Errorf("credentials[%d]: upstream and kind are required", i)
		case len(r.Sealed) == 0:
			return nil, nil, fmt.Errorf("credentials[%d]: no sealed data", i)
		}
		if _, dup := byKey[k]; dup {
			return nil, nil, fmt.Errorf("credentials[%d]: %s appears twice", i, k)
		}
		byKey[k] = r
	}
	used := make(map[string]time.Time, len(ff.Used))
	for _, u := range ff.Used {
		used[u.ID] = u.Until
	}
	return byKey, used, nil
}

func encodeFile(byKey map[Key]fileRecord, used map[string]time.Time) ([]byte, error) {
	ff := fileFormat{Version: fileVersion, Credentials: make([]fileRecord, 0, len(byKey))}
	for id, until := range used {
		ff.Used = append(ff.Used, fileUsed{ID: id, Until: until})
	}
	slices.SortFunc(ff.Used, func(a, b fileUsed) int { return strings.Compare(a.ID, b.ID) })
	entries := make([]Entry, 0, len(byKey))
	for _, r := range byKey {
		entries = append(entries, r.entry())
	}
	SortEntries(entries)
	for _, e := range entries {
		ff.Credentials = append(ff.Credentials, byKey[e.Key])
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ff); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// update runs change on the file's records under the lock, re-read first, and writes them back when
// change returns nil.
func (f *File) update(change func(byKey map[Key]fileRecord) error) error {
	return f.updateAll(func(byKey map[Key]fileRecord, _ map[string]time.Time) error { return change(byKey) })
}

// updateAll is update with the used single-use tokens too; expired ones are dropped.
func (f *File) updateAll(change func(byKey map[Key]fileRecord, used map[string]time.Time) error) error {
	unlock, err := statefile.Lock(f.path, FileMode)
	if err != nil {
		return fmt.Errorf("credentials file: %w", err)
	}
	defer unlock()
	statefile.CleanStale(f.path)
	byKey, used, err := readRecords(f.path)
	if err != nil {
		return err
	}
	now := time.Now()
	maps.DeleteFunc(used, func(_ string, until time.Time) bool { return !now.Before(until) })
	if err := change(byKey, used); err != nil {
		return err
	}
	data, err := encodeFile(byKey, used)
	if err != nil {
		return err
	}
	err = statefile.WriteAtomic(f.path, data, FileMode)
	f.mu.Lock()
	f.loaded = false // read again at the next Get, even if the stamp looked alike
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("credentials file %s: %w", f.path, err)
	}
	return nil
}

// Get implements Store.
func (f *File) Get(_ context.Context, k Key) ([]byte, Entry, error) {
	byKey, err := f.records()
	if err != nil {
		return nil, Entry{}, err
	}
	r, ok := byKey[k]
	if !ok {
		return nil, Entry{}, ErrNotFound
	}
	return slices.Clone(r.Sealed), r.entry(), nil
}

// Put implements Store.
func (f *File) Put(_ context.Context, e Entry, data []byte) error {
	return f.update(func(byKey map[Key]fileRecord) error {
		byKey[e.Key] = recordOf(e, data)
		return nil
	})
}

// CompareAndPut implements Backend.
func (f *File) CompareAndPut(_ context.Context, e Entry, old, data []byte) error {
	return f.update(func(byKey map[Key]fileRecord) error {
		cur, ok := byKey[e.Key]
		switch {
		case !ok:
			return ErrNotFound
		case !bytes.Equal(cur.Sealed, old):
			return ErrChanged
		}
		byKey[e.Key] = recordOf(e, data)
		return nil
	})
}

// Delete implements Store.
func (f *File) Delete(_ context.Context, k Key) error {
	return f.update(func(byKey map[Key]fileRecord) error {
		if _, ok := byKey[k]; !ok {
			return ErrNotFound
		}
		delete(byKey, k)
		return nil
	})
}

// TakeOnce implements Once, under the file's lock: one writer at a time, so two replicas on one host
// cannot both take id.
func (f *File) TakeOnce(_ context.Context, id string, until time.Time) (bool, error) {
	taken := false
	err := f.updateAll(func(_ map[Key]fileRecord, used map[string]time.Time) error {
		if _, ok := used[id]; ok {
			return errAlreadyTaken
		}
		used[id], taken = until, true
		return nil
	})
	if errors.Is(err, errAlreadyTaken) {
		return false, nil
	}
	return taken, err
}

// List implements Store.
func (f *File) List(_ context.Context, flt Filter) ([]Entry, error) {
	byKey, err := f.records()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, r := range byKey {
		if e := r.entry(); flt.Matches(e) {
			out = append(out, e)
		}
	}
	SortEntries(out)
	return out, nil
}
