package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// The records, under the prefix:
//
//	cred:records   one hash: field ["<principal>","<upstream>","<kind>"] (a JSON array, so no two keys
//	               share a field), value {"updated", "expires", "source", "sealed"} (JSON; sealed is
//	               base64 of the sealed record)
//
// One hash keeps Get, Put and Delete to one command each, and List to an HSCAN that never blocks the
// server for long. Records do not expire in Redis: an OAuth record outlives its access token (its
// refresh token is still good), and revoking is an explicit Delete.
const recordsKey = "cred:records"

// casScript is CompareAndPut. KEYS: the hash. ARGV: the field, the sealed data expected (base64), the
// new value. Replies ok, notfound or changed.
const casScript = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 'notfound' end
if cjson.decode(cur).sealed ~= ARGV[2] then return 'changed' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 'ok'
`

var cas = redis.NewScript(casScript)

// scanCount is how many fields one HSCAN step asks for.
const scanCount = 500

// Store is the vault.Backend of replicas sharing the store. Its failures wrap state.ErrUnavailable
// while the store is known down: a call then answers upstream_unavailable (never
// authorization_required, which would send a user to connect again for nothing).
type Store struct {
	c *state.Client
}

var _ vault.Backend = (*Store)(nil)

// New returns the vault backend in c's store.
func New(c *state.Client) *Store { return &Store{c: c} }

type record struct {
	Updated time.Time `json:"updated"`
	Expires time.Time `json:"expires,omitzero"`
	Source  string    `json:"source,omitempty"`
	Sealed  []byte    `json:"sealed"`
}

func field(k vault.Key) string {
	b, _ := json.Marshal([]string{k.Principal, k.Upstream, string(k.Kind)}) // strings always marshal
	return string(b)
}

func keyOf(f string) (vault.Key, error) {
	var parts []string
	if err := json.Unmarshal([]byte(f), &parts); err != nil || len(parts) != 3 {
		return vault.Key{}, fmt.Errorf("vault record field %.80q is not [principal, upstream, kind]", f)
	}
	return vault.Key{Principal: parts[0], Upstream: parts[1], Kind: vault.Kind(parts[2])}, nil
}

func (s *Store) do(ctx context.Context, op func(ctx context.Context, rdb *redis.Client) error) error {
	return s.c.Do(ctx, state.FeatureCredentials, func(ctx context.Context) error { return op(ctx, s.c.Redis()) })
}

// Get implements vault.Store.
func (s *Store) Get(ctx context.Context, k vault.Key) ([]byte, vault.Entry, error) {
	var raw string
	err := s.do(ctx, func(ctx context.Context, rdb *redis.Client) (err error) {
		raw, err = rdb.HGet(ctx, s.c.Key(recordsKey), field(k)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, vault.Entry{}, vault.ErrNotFound
	}
	if err != nil {
		return nil, vault.Entry{}, fmt.Errorf("vault in redis: %w", err)
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, vault.Entry{}, fmt.Errorf("vault in redis: the record of %s is damaged: %v", k, err)
	}
	return r.Sealed, r.entry(k), nil
}

func (r record) entry(k vault.Key) vault.Entry {
	return vault.Entry{Key: k, Updated: r.Updated, Expires: r.Expires, Source: r.Source}
}

func encode(e vault.Entry, data []byte) (string, error) {
	b, err := json.Marshal(record{Updated: e.Updated, Expires: e.Expires, Source: e.Source, Sealed: data})
	return string(b), err
}

// Put implements vault.Store.
func (s *Store) Put(ctx context.Context, e vault.Entry, data []byte) error {
	v, err := encode(e, data)
	if err != nil {
		return err
	}
	if err := s.do(ctx, func(ctx context.Context, rdb *redis.Client) error {
		return rdb.HSet(ctx, s.c.Key(recordsKey), field(e.Key), v).Err()
	}); err != nil {
		return fmt.Errorf("vault in redis: %w", err)
	}
	return nil
}

// CompareAndPut implements vault.Backend, in one script.
func (s *Store) CompareAndPut(ctx context.Context, e vault.Entry, old, data []byte) error {
	v, err := encode(e, data)
	if err != nil {
		return err
	}
	oldB64, _ := json.Marshal(old) // []byte marshals as a base64 string, as in the record
	var reply string
	err = s.do(ctx, func(ctx context.Context, rdb *redis.Client) (err error) {
		reply, err = cas.Run(ctx, rdb, []string{s.c.Key(recordsKey)}, field(e.Key), string(oldB64[1:len(oldB64)-1]), v).Text()
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("vault in redis: %w", err)
	case reply == "notfound":
		return vault.ErrNotFound
	case reply == "changed":
		return vault.ErrChanged
	case reply == "ok":
		return nil
	}
	return fmt.Errorf("vault in redis: compare-and-put script: unexpected reply %q", reply)
}

// usedPrefix is where TakeOnce keeps a used token: <prefix>cred:used:<id>, a key of its own expiring
// with it (SET NX PXAT), so Redis drops it and no sweep is needed.
const usedPrefix = "cred:used:"

// TakeOnce implements vault.Once, in one SET NX: of two replicas taking id, one wins.
func (s *Store) TakeOnce(ctx context.Context, id string, until time.Time) (bool, error) {
	taken := false
	if err := s.do(ctx, func(ctx context.Context, rdb *redis.Client) error {
		err := rdb.SetArgs(ctx, s.c.Key(usedPrefix+id), "1", redis.SetArgs{Mode: "NX", ExpireAt: until}).Err()
		if errors.Is(err, redis.Nil) { // NX: it was there, an answer and not a failure of the store
			return nil
		}
		taken = err == nil
		return err
	}); err != nil {
		return false, fmt.Errorf("vault in redis: %w", err)
	}
	return taken, nil
}

// Delete implements vault.Store.
func (s *Store) Delete(ctx context.Context, k vault.Key) error {
	var n int64
	if err := s.do(ctx, func(ctx context.Context, rdb *redis.Client) (err error) {
		n, err = rdb.HDel(ctx, s.c.Key(recordsKey), field(k)).Result()
		return err
	}); err != nil {
		return fmt.Errorf("vault in redis: %w", err)
	}
	if n == 0 {
		return vault.ErrNotFound
	}
	return nil
}

// List implements vault.Store: an HSCAN of the hash, each step bounded by the operation timeout.
func (s *Store) List(ctx context.Context, f vault.Filter) ([]vault.Entry, error) {
	var out []vault.Entry
	var cursor uint64
	for {
		var kv []string
		if err := s.do(ctx, func(ctx context.Context, rdb *redis.Client) (err error) {
			kv, cursor, err = rdb.HScan(ctx, s.c.Key(recordsKey), cursor, "", scanCount).Result()
			return err
		}); err != nil {
			return nil, fmt.Errorf("vault in redis: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			k, err := keyOf(kv[i])
			if err != nil {
				return nil, err
			}
			var r record
			if err := json.Unmarshal([]byte(kv[i+1]), &r); err != nil {
				return nil, fmt.Errorf("vault in redis: the record of %s is damaged: %v", k, err)
			}
			if e := r.entry(k); f.Matches(e) {
				out = append(out, e)
			}
		}
		if cursor == 0 {
			break
		}
	}
	// HSCAN may return a field twice while the hash grows; keep the first.
	seen := make(map[vault.Key]bool, len(out))
	uniq := out[:0]
	for _, e := range out {
		if !seen[e.Key] {
			seen[e.Key] = true
			uniq = append(uniq, e)
		}
	}
	vault.SortEntries(uniq)
	return uniq, nil
}
