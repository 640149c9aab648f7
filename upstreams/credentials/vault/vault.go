// Package vault keeps the credentials toolgate holds on behalf of a principal for one upstream: a
// user's OAuth tokens (auth mode oauth) and a user's own secret (auth mode per_user), and the
// gateway's own registration at an upstream's authorization server (Principal "").
//
// It exists so that every replica can act upstream as the calling user without the user's
// credential ever reaching the gateway's logs, audit trail, metrics or an unencrypted file. The
// Store interface is what the auth modes use; the stores behind it (in memory for tests, an
// encrypted file by default, Redis when state.redis is set) decide where the bytes live. Data is
// opaque here: each mode serializes its own record; Kind Secret's data is the secret itself, as the
// user gave it (CheckSecret says what is accepted).
package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Kind is what a stored credential is.
type Kind string

// The kinds of stored credential.
const (
	OAuth        Kind = "oauth"        // a user's access and refresh token for an upstream (auth mode oauth)
	Secret       Kind = "secret"       // a user's own static credential for an upstream (auth mode per_user)
	Registration Kind = "registration" // the gateway's client at an upstream's authorization server (Principal "")
)

// Key names one stored credential.
type Key struct {
	Principal string // "" for the gateway's own (Registration)
	Upstream  string // mcpServers.<name>
	Kind      Kind
}

// String is the key as messages show it: principal, upstream and kind, quoted.
func (k Key) String() string {
	return fmt.Sprintf("(principal %q, upstream %q, kind %s)", k.Principal, k.Upstream, k.Kind)
}

// Entry describes a stored credential without its secret part: what List returns and what a
// console or the credentials command may show.
type Entry struct {
	Key
	Updated time.Time // when it was stored
	Expires time.Time // when it stops being usable; zero when it does not expire (or refreshes itself)
	// Source is who supplied it: "operator" (toolgate credentials set, the admin API) or "user" (the
	// consent page). Free text for display; never secret.
	Source string
}

// Filter selects entries for List; an empty field matches any value.
type Filter struct {
	Principal string
	Upstream  string
	Kind      Kind
}

// Matches reports whether e is selected by f.
func (f Filter) Matches(e Entry) bool {
	return (f.Principal == "" || f.Principal == e.Principal) &&
		(f.Upstream == "" || f.Upstream == e.Upstream) &&
		(f.Kind == "" || f.Kind == e.Kind)
}

// ErrNotFound is returned, possibly wrapped, by Get and Delete for a key with nothing stored.
var ErrNotFound = errors.New("no credential stored")

// Store keeps credentials. Implementations are safe for concurrent use; data passed to Put and
// returned by Get is the caller's to keep (implementations copy).
type Store interface {
	// Get returns the data stored under k and its entry, or ErrNotFound.
	Get(ctx context.Context, k Key) ([]byte, Entry, error)
	// Put stores data under e.Key, replacing what was there.
	Put(ctx context.Context, e Entry, data []byte) error
	// Delete removes k; ErrNotFound when nothing was stored.
	Delete(ctx context.Context, k Key) error
	// List returns the entries f selects, sorted by upstream, principal, kind. Never secret data.
	List(ctx context.Context, f Filter) ([]Entry, error)
}

// Memory is a Store in this process's memory, for tests and for a gateway with nothing to share.
// Its zero value is ready to use.
type Memory struct {
	mu   sync.Mutex
	m    map[Key]memoryItem
	used map[string]time.Time
}

// TakeOnce implements Once.
func (s *Memory) TakeOnce(_ context.Context, id string, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.used == nil {
		s.used = map[string]time.Time{}
	}
	if t, ok := s.used[id]; ok && now.Before(t) {
		return false, nil
	}
	s.used[id] = until
	return true, nil
}

type memoryItem struct {
	e    Entry
	data []byte
}

// Get implements Store.
func (s *Memory) Get(_ context.Context, k Key) ([]byte, Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.m[k]
	if !ok {
		return nil, Entry{}, ErrNotFound
	}
	return slices.Clone(it.data), it.e, nil
}

// Put implements Store.
func (s *Memory) Put(_ context.Context, e Entry, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Key]memoryItem{}
	}
	s.m[e.Key] = memoryItem{e: e, data: slices.Clone(data)}
	return nil
}

// Delete implements Store.
func (s *Memory) Delete(_ context.Context, k Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; !ok {
		return ErrNotFound
	}
	delete(s.m, k)
	return nil
}

// CompareAndPut implements Backend.
func (s *Memory) CompareAndPut(_ context.Context, e Entry, old, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.m[e.Key]
	switch {
	case !ok:
		return ErrNotFound
	case !bytes.Equal(it.data, old):
		return ErrChanged
	}
	s.m[e.Key] = memoryItem{e: e, data: slices.Clone(data)}
	return nil
}

// List implements Store.
func (s *Memory) List(_ context.Context, f Filter) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for _, it := range s.m {
		if f.Matches(it.e) {
			out = append(out, it.e)
		}
	}
	SortEntries(out)
	return out, nil
}

// SortEntries sorts entries by upstream, principal, kind: the order List promises.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := strings.Compare(a.Upstream, b.Upstream); c != 0 {
			return c
		}
		if c := strings.Compare(a.Principal, b.Principal); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
}

// Revoke deletes every credential f selects for one principal at one upstream (f.Principal and
// f.Upstream are required, so that a revoke never empties the vault) and returns what it deleted. A
// credential deleted meanwhile by someone else is not an error.
func Revoke(ctx context.Context, s Store, f Filter) ([]Entry, error) {
	if f.Principal == "" || f.Upstream == "" {
		return nil, errors.New("revoke: a principal and an upstream are required")
	}
	list, err := s.List(ctx, f)
	if err != nil {
		return nil, err
	}
	var done []Entry
	for _, e := range list {
		switch err := s.Delete(ctx, e.Key); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return done, err
		default:
			done = append(done, e)
		}
	}
	return done, nil
}
