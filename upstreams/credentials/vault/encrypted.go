package vault

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Backend keeps sealed records: the file (File), Redis (package redisstore), memory (Memory). Its
// data is ciphertext; Encrypted puts the cipher in front of it, so the cipher lives in one place.
type Backend interface {
	Store
	Once
	// CompareAndPut stores data under e.Key only while what is stored there is still old (ErrChanged
	// otherwise; ErrNotFound when nothing is), so that re-sealing (Rekey) never overwrites a
	// credential stored meanwhile with an older one.
	CompareAndPut(ctx context.Context, e Entry, old, data []byte) error
}

// Once remembers single-use tokens (a connect link that stored a credential) until they expire, where
// the credentials are, so that every replica sharing them refuses a second use.
type Once interface {
	// TakeOnce records id as used until until; false when it already was (and has not expired).
	TakeOnce(ctx context.Context, id string, until time.Time) (bool, error)
}

// errAlreadyTaken stops a file update whose token was taken already.
var errAlreadyTaken = errors.New("already taken")

// ErrChanged: CompareAndPut found other data than expected.
var ErrChanged = errors.New("the credential changed meanwhile")

// Encrypted is the Store the gateway uses: every record's data sealed with the keyring before it
// reaches the backend, and opened after. Entries (who, which upstream, kind, times, source) are kept
// in clear beside the ciphertext, so that listing needs no key.
type Encrypted struct {
	b    Backend
	keys *Keyring
}

var _ Store = (*Encrypted)(nil)

// NewEncrypted returns the store of b sealed with keys.
func NewEncrypted(b Backend, keys *Keyring) *Encrypted { return &Encrypted{b: b, keys: keys} }

// Get implements Store. A record that cannot be opened is an error naming its key and why, never
// ErrNotFound: a damaged vault or a missing key must not look like a user who never connected.
func (s *Encrypted) Get(ctx context.Context, k Key) ([]byte, Entry, error) {
	sealed, e, err := s.b.Get(ctx, k)
	if err != nil {
		return nil, Entry{}, err
	}
	plain, err := s.keys.Open(k, sealed)
	if err != nil {
		return nil, Entry{}, fmt.Errorf("credential %s: %w", k, err)
	}
	return plain, e, nil
}

// Put implements Store.
func (s *Encrypted) Put(ctx context.Context, e Entry, data []byte) error {
	sealed, err := s.keys.Seal(e.Key, data)
	if err != nil {
		return err
	}
	return s.b.Put(ctx, e, sealed)
}

// TakeOnce implements Once: ids are not secret, so the backend keeps them as they are.
func (s *Encrypted) TakeOnce(ctx context.Context, id string, until time.Time) (bool, error) {
	return s.b.TakeOnce(ctx, id, until)
}

// Delete implements Store.
func (s *Encrypted) Delete(ctx context.Context, k Key) error { return s.b.Delete(ctx, k) }

// List implements Store.
func (s *Encrypted) List(ctx context.Context, f Filter) ([]Entry, error) { return s.b.List(ctx, f) }

// RekeyReport is what Rekey did.
type RekeyReport struct {
	Resealed int   // records sealed again with the first key
	Current  int   // records already sealed with it
	Changed  int   // records stored anew while Rekey ran (sealed with the first key by whoever stored them)
	Unopened []Key // records no key of the ring opens: left as they are
}

// Rekey seals every record with the keyring's first key, so that the other keys can then be dropped.
// A record stored or deleted meanwhile is left to whoever did it; a record no key opens is left as
// it is and reported.
func (s *Encrypted) Rekey(ctx context.Context) (RekeyReport, error) {
	var r RekeyReport
	entries, err := s.b.List(ctx, Filter{})
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		sealed, cur, err := s.b.Get(ctx, e.Key)
		switch {
		case errors.Is(err, ErrNotFound):
			r.Changed++
			continue
		case err != nil:
			return r, err
		case s.keys.SealedWithPrimary(sealed):
			r.Current++
			continue
		}
		plain, err := s.keys.Open(e.Key, sealed)
		if err != nil {
			r.Unopened = append(r.Unopened, e.Key)
			continue
		}
		resealed, err := s.keys.Seal(e.Key, plain)
		if err != nil {
			return r, err
		}
		switch err := s.b.CompareAndPut(ctx, cur, sealed, resealed); {
		case errors.Is(err, ErrChanged) || errors.Is(err, ErrNotFound):
			r.Changed++
		case err != nil:
			return r, err
		default:
			r.Resealed++
		}
	}
	return r, nil
}

// Check opens every record with the keyring and reports which do not open (sealed with a key that is
// not configured, or damaged), so that a wrong key is found at start rather than at each user's call.
func (s *Encrypted) Check(ctx context.Context) (opened int, unopened []Key, err error) {
	entries, err := s.b.List(ctx, Filter{})
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		sealed, _, err := s.b.Get(ctx, e.Key)
		switch {
		case errors.Is(err, ErrNotFound): // deleted meanwhile
			continue
		case err != nil:
			return opened, unopened, err
		}
		if _, err := s.keys.Open(e.Key, sealed); err != nil {
			unopened = append(unopened, e.Key)
			continue
		}
		opened++
	}
	return opened, unopened, nil
}
