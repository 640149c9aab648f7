package console

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Session is one signed-in approver.
type Session struct {
	Approver string    // the name decisions are recorded under
	Method   string    // how they signed in: "key" or "oidc"
	KeyID    string    // with "key": the fingerprint of the key they signed in with (see keyID)
	CSRF     string    // the token every form of this session carries
	Created  time.Time //
	Expires  time.Time // the session ends here, whatever happens
}

// Sessions keeps the sessions by the SHA-256 hex of their id (the cookie's value), so that what is
// stored cannot be replayed as a cookie. MemorySessions keeps them in this process: a restart signs
// everyone out. With state.redis, console/redisstore keeps them in Redis, so every replica knows
// every sign-in.
type Sessions interface {
	Put(ctx context.Context, key string, s Session) error
	// Get returns the session, or ok false when there is none or it has expired.
	Get(ctx context.Context, key string, now time.Time) (s Session, ok bool, err error)
	Delete(ctx context.Context, key string) error
}

// ErrTooManySessions is MemorySessions' refusal of a new session beyond its bound.
var ErrTooManySessions = errors.New("too many console sessions")

// MaxSessions bounds MemorySessions.
const MaxSessions = 10000

// MemorySessions is Sessions in this process's memory, bounded by MaxSessions (expired ones are
// dropped first).
type MemorySessions struct {
	mu  sync.Mutex
	m   map[string]Session
	now func() time.Time
}

// NewMemorySessions is an empty MemorySessions on the clock now (nil: time.Now).
func NewMemorySessions(now func() time.Time) *MemorySessions {
	if now == nil {
		now = time.Now
	}
	return &MemorySessions{m: map[string]Session{}, now: now}
}

// Put implements Sessions.
func (m *MemorySessions) Put(_ context.Context, key string, s Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= MaxSessions {
		now := m.now()
		for k, v := range m.m {
			if !now.Before(v.Expires) {
				delete(m.m, k)
			}
		}
		if len(m.m) >= MaxSessions {
			return ErrTooManySessions
		}
	}
	m.m[key] = s
	return nil
}

// Get implements Sessions.
func (m *MemorySessions) Get(_ context.Context, key string, now time.Time) (Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[key]
	if ok && !now.Before(s.Expires) {
		delete(m.m, key)
		return Session{}, false, nil
	}
	return s, ok, nil
}

// Delete implements Sessions.
func (m *MemorySessions) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}

// Len is how many sessions are held (expired ones not yet dropped included).
func (m *MemorySessions) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
