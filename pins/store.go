package pins

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/statefile"
)

// Mode is how tools without a matching pin are treated.
type Mode string

// The pinning modes (config key pinning.mode).
const (
	// Off pins nothing: every tool is callable as listed, and the lock file
	// is neither read nor written (Approve still writes it).
	Off Mode = "off"
	// TOFU (trust on first use) records a tool's definition the first time
	// it is seen; a later different definition is Changed.
	TOFU Mode = "tofu"
	// Strict makes a tool without a pin Pending until an admin approves it;
	// a different definition is Changed.
	Strict Mode = "strict"
)

// ParseMode accepts off, tofu and strict; "" is tofu, the default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return TOFU, nil
	case Off, TOFU, Strict:
		return m, nil
	}
	return "", fmt.Errorf("pinning mode %q: expected off, tofu or strict", s)
}

// Verdict is what Check decided about one tool.
type Verdict int

// The verdicts. Pinned, Recorded and Unpinned tools are callable; Pending,
// Changed and Invalid ones are not.
const (
	// Pinned: the definition matches its pin.
	Pinned Verdict = iota
	// Recorded: first sight in tofu mode; the definition is now pinned.
	Recorded
	// Unpinned: nothing was checked (mode off), or a first-seen tool in tofu
	// mode on a store opened WithoutRecording.
	Unpinned
	// Pending: first sight in strict mode; not callable until approved.
	Pending
	// Changed: the definition differs from its pin; not callable until
	// approved.
	Changed
	// Invalid: the definition cannot be canonicalised (see
	// Definition.Canonical), so it cannot be pinned; not callable.
	Invalid
)

func (v Verdict) String() string {
	switch v {
	case Pinned:
		return "pinned"
	case Recorded:
		return "recorded"
	case Unpinned:
		return "unpinned"
	case Pending:
		return "pending"
	case Changed:
		return "changed"
	case Invalid:
		return "invalid"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Callable reports whether a tool with this verdict may be called.
func (v Verdict) Callable() bool { return v == Pinned || v == Recorded || v == Unpinned }

// Entry is one pin as kept in the lock file.
type Entry struct {
	Hash       string          `json:"hash"`        // "sha256:" + hex of Definition
	ApprovedAt time.Time       `json:"approved_at"` // when it was recorded (tofu) or approved
	Definition json.RawMessage `json:"definition"`  // canonical JSON (see Definition.Canonical)
}

// Def decodes the pinned definition.
func (e Entry) Def() (Definition, error) { return ParseDefinition(e.Definition) }

// Result is Check's answer for one tool.
type Result struct {
	Verdict Verdict
	Hash    string // the checked definition's hash; "" when Invalid
	Pin     Entry  // the pin it was compared with (Pinned, Changed); zero otherwise
	Err     error  // why the definition is Invalid
}

// Store is the set of pins of one lock file. It is safe for concurrent use,
// and several processes may share the file: every write takes a file lock,
// re-reads the file and merges, so an approval written by `toolgate pins
// approve` is never overwritten by a running gateway (and the other way
// round). Reads use the in-memory copy; Reload refreshes it.
type Store struct {
	path   string
	mode   Mode
	record bool
	now    func() time.Time

	// beforeRename is a test hook; see statefile.WriteAtomicHook.
	beforeRename func(tmp string) error

	mu   sync.Mutex       // guards pins and unsaved; held across writes
	pins map[string]Entry // the lock file as last read or written
	// unsaved are tofu records whose write failed: they are honoured in
	// memory (a change within this process is still caught) and written
	// with the next successful write.
	unsaved map[string]Entry
}

// Option configures Open.
type Option func(*Store)

// WithoutRecording makes Check read-only: in tofu mode a first-seen tool is
// Unpinned rather than Recorded. For commands that inspect (toolgate check,
// tools, pins diff) and must not trust anything on the operator's behalf.
// Approve still writes.
func WithoutRecording() Option { return func(s *Store) { s.record = false } }

// Open reads the lock file at path (a missing file is an empty one). A
// file that cannot be read or is not a complete, consistent lock file is an
// error naming it. In mode Off the file is not read.
func Open(path string, mode Mode, opts ...Option) (*Store, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	if mode == "" {
		mode = TOFU
	}
	s := &Store{path: path, mode: mode, record: true, now: time.Now, pins: map[string]Entry{}, unsaved: map[string]Entry{}}
	for _, o := range opts {
		o(s)
	}
	if mode == Off {
		return s, nil
	}
	m, err := readFile(path)
	if err != nil {
		return nil, err
	}
	s.pins = m
	return s, nil
}

// Path is the lock file.
func (s *Store) Path() string { return s.path }

// Mode is the store's pinning mode.
func (s *Store) Mode() Mode { return s.mode }

// Reload re-reads the lock file, for example after `toolgate pins approve`
// wrote it. On error the store keeps what it had. In mode Off it does
// nothing.
func (s *Store) Reload() error {
	if s.mode == Off {
		return nil
	}
	m, err := readFile(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pins = m
	s.mu.Unlock()
	return nil
}

// Pin returns the pin of a tool ID.
func (s *Store) Pin(id string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(id)
}

// Pins returns a copy of every pin, by tool ID.
func (s *Store) Pins() map[string]Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.pins)
	for id, e := range s.unsaved {
		if _, ok := out[id]; !ok {
			out[id] = e
		}
	}
	return out
}

func (s *Store) lookup(id string) (Entry, bool) {
	if e, ok := s.pins[id]; ok {
		return e, true
	}
	e, ok := s.unsaved[id]
	return e, ok
}

// Check decides about one tool; see CheckAll. The error is a failure to
// write a new tofu pin (the verdict still stands) or, with Invalid, why the
// definition cannot be pinned.
func (s *Store) Check(id string, def Definition) (Verdict, error) {
	res, err := s.CheckAll(map[string]Definition{id: def})
	if r := res[id]; r.Err != nil {
		return r.Verdict, r.Err
	}
	return res[id].Verdict, err
}

// CheckAll compares each definition (by tool ID) with its pin:
//
//	pin with the same hash          Pinned
//	pin with another hash           Changed
//	no pin, strict                  Pending
//	no pin, tofu                    Recorded (written to the lock file), or
//	                                Unpinned on a store opened WithoutRecording
//	mode off                        Unpinned
//	definition not canonicalisable  Invalid (Result.Err says why)
//
// New tofu pins are written in one write. If that write fails the error is
// returned, the verdicts stand, and the pins are kept in memory (and
// retried with the next write), so a change later in this process's life is
// still caught.
func (s *Store) CheckAll(defs map[string]Definition) (map[string]Result, error) {
	out := make(map[string]Result, len(defs))
	if s.mode == Off {
		for id := range defs {
			out[id] = Result{Verdict: Unpinned}
		}
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := map[string]Entry{}
	for id, def := range defs {
		canon, err := def.Canonical()
		if err != nil {
			out[id] = Result{Verdict: Invalid, Err: err}
			continue
		}
		hash := hashOf(canon)
		if pin, ok := s.lookup(id); ok {
			out[id] = compare(hash, pin)
			continue
		}
		switch {
		case s.mode == Strict:
			out[id] = Result{Verdict: Pending, Hash: hash}
		case !s.record:
			out[id] = Result{Verdict: Unpinned, Hash: hash}
		default:
			fresh[id] = Entry{Hash: hash, ApprovedAt: s.stamp(), Definition: canon}
		}
	}
	if len(fresh) == 0 {
		return out, nil
	}
	taken := map[string]bool{} // pinned by another process since we last read the file
	err := s.updateLocked(func(file map[string]Entry) {
		for id, e := range fresh {
			if _, ok := file[id]; ok {
				taken[id] = true // its pin counts, not our first sight
				continue
			}
			file[id] = e
		}
	})
	for id, e := range fresh {
		pin, ok := s.lookup(id)
		switch {
		case taken[id] && ok:
			out[id] = compare(e.Hash, pin)
		case !ok: // the write failed: keep the pin in memory
			s.unsaved[id] = e
			fallthrough
		default:
			out[id] = Result{Verdict: Recorded, Hash: e.Hash, Pin: e}
		}
	}
	if err != nil {
		return out, fmt.Errorf("new pins kept in memory only: %w", err)
	}
	return out, nil
}

func compare(hash string, pin Entry) Result {
	if pin.Hash == hash {
		return Result{Verdict: Pinned, Hash: hash, Pin: pin}
	}
	return Result{Verdict: Changed, Hash: hash, Pin: pin}
}

func (s *Store) stamp() time.Time { return s.now().UTC().Truncate(time.Second) }

// Approve pins def as the approved definition of the tool ID, replacing any
// pin it had, and writes the lock file. It works in every mode.
func (s *Store) Approve(id string, def Definition) error {
	return s.ApproveAll(map[string]Definition{id: def})
}

// ApproveAll approves several tools in one write.
func (s *Store) ApproveAll(defs map[string]Definition) error {
	entries := make(map[string]Entry, len(defs))
	for id, def := range defs {
		if !idRe.MatchString(id) {
			return fmt.Errorf("approve %q: expected a tool ID <server>/<tool>", id)
		}
		canon, err := def.Canonical()
		if err != nil {
			return fmt.Errorf("approve %s: %w", id, err)
		}
		entries[id] = Entry{Hash: hashOf(canon), ApprovedAt: s.stamp(), Definition: canon}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(func(file map[string]Entry) { maps.Copy(file, entries) })
}

// updateLocked is the one write path: under the file lock it re-reads the
// file (so nothing another process wrote is lost), applies change to that,
// adds unsaved tofu pins the file lacks, and writes the result atomically.
// The in-memory pins become what the file holds: the new content on
// success, the re-read content on failure. s.mu is held.
func (s *Store) updateLocked(change func(file map[string]Entry)) error {
	unlock, err := statefile.Lock(s.path, 0o644)
	if err != nil {
		return fmt.Errorf("pins %w", err)
	}
	defer unlock()
	statefile.CleanStale(statefile.FollowLinks(s.path))
	current, err := readFile(s.path)
	if err != nil {
		return err // never overwrite a file we cannot read: it may hold approvals
	}
	s.pins = current
	next := maps.Clone(current)
	change(next)
	for id, e := range s.unsaved {
		if _, ok := next[id]; !ok {
			next[id] = e
		}
	}
	data, err := encodeFile(next)
	if err != nil {
		return err
	}
	if err := statefile.WriteAtomicHook(statefile.FollowLinks(s.path), data, 0o644, s.beforeRename); err != nil {
		return fmt.Errorf("pins file %s: %w", s.path, err)
	}
	s.pins = next
	clear(s.unsaved)
	return nil
}
