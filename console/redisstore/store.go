// Package redisstore keeps console sign-in sessions in Redis (the store of package state): a
// console.Sessions, so that an approver signed in through one replica is signed in on every replica,
// and signing out (or a session ending because its approver was removed) ends it everywhere. It lives
// beside package console, which owns sessions and why they are server-side, so that everything about
// the console is in one folder; it is a package of its own so that a gateway without Redis does not
// depend on it.
//
// Sessions in Redis rather than stateless signed cookies: a signed cookie cannot be revoked before it
// expires (signing out, removing an approver or replacing a leaked key would not end it on any
// replica) short of a shared deny list, which is Redis again; it would need a signing key shared by
// every replica, a new secret to configure and rotate; and the console is useless without Redis anyway
// when approvals live there. The cost is one GET per page view.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/state"
)

// Feature labels this store's failures in toolgate_state_errors_total.
const Feature = "console_sessions"

// Sessions is console.Sessions in Redis. Under the prefix:
//
//	console:sess:<key>   the session as JSON (approver, method, key fingerprint, CSRF token, created,
//	                     expires), expiring (PX) when the session does. <key> is the SHA-256 hex of the
//	                     cookie's value (console hashes it), so what is stored cannot be used as a cookie.
//
// Sessions are bounded by time, not count: each needs a successful sign-in, which the console limits
// per address, and ends at console.session_ttl.
type Sessions struct {
	c *state.Client
}

var _ console.Sessions = (*Sessions)(nil)

// New returns the sessions in c's store.
func New(c *state.Client) *Sessions { return &Sessions{c: c} }

func (s *Sessions) key(k string) string { return s.c.Key("console:sess:" + k) }

// Put implements console.Sessions.
func (s *Sessions) Put(ctx context.Context, key string, sess console.Session) error {
	data, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	ttl := sess.Expires.Sub(sess.Created) // both read from the console's clock
	if ttl <= 0 {
		return nil // already over: nothing to keep
	}
	return s.c.Do(ctx, Feature, func(ctx context.Context) error {
		return s.c.Redis().Set(ctx, s.key(key), data, ttl).Err()
	})
}

// Get implements console.Sessions. An unreachable store is an error (the console answers 503), never
// "signed out".
func (s *Sessions) Get(ctx context.Context, key string, now time.Time) (console.Session, bool, error) {
	var data []byte
	err := s.c.Do(ctx, Feature, func(ctx context.Context) error {
		var err error
		data, err = s.c.Redis().Get(ctx, s.key(key)).Bytes()
		if errors.Is(err, redis.Nil) {
			data, err = nil, nil
		}
		return err
	})
	if err != nil || data == nil {
		return console.Session{}, false, err
	}
	var sess console.Session
	if err := json.Unmarshal(data, &sess); err != nil {
		return console.Session{}, false, fmt.Errorf("console session in the store: %w", err)
	}
	if !now.Before(sess.Expires) {
		return console.Session{}, false, nil
	}
	return sess, true, nil
}

// Delete implements console.Sessions.
func (s *Sessions) Delete(ctx context.Context, key string) error {
	return s.c.Do(ctx, Feature, func(ctx context.Context) error {
		return s.c.Redis().Del(ctx, s.key(key)).Err()
	})
}
