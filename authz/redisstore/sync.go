package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/state"
)

// Policy reloads travel between replicas as announcements, never as policy:
// a replica that swapped in a new policy publishes its version on a
// channel and records it under a key; every other replica that runs a
// different version re-reads its own files (shared storage, or deployed
// identically). A replica that was cut off compares the key with its own
// version when it reconnects, so a missed message is made up for.
//
// An announcement cannot loop: a replica announces only after a swap, and
// a swap needs files that changed.

// announcement is the channel's message.
type announcement struct {
	Version string `json:"version"`
	Replica string `json:"replica"`
}

// Sync keeps this replica's policy in step with the others'.
type Sync struct {
	c       *state.Client
	replica string
	version func() string // the version in force here
	reload  func() error  // re-reads this replica's files

	wake  chan struct{} // work to do: an announcement to publish, or a reconcile
	mu    sync.Mutex
	out   string // version to announce; "" when none is pending
	sync  bool   // compare with the published version
	known string // the version last seen published, which needs no announcing again
}

// New returns the sync for this replica over c's store; Start starts it. replica
// names this process in announcements and logs; version and reload are the
// local policy store's (reload may call Announce).
func New(c *state.Client, replica string, version func() string, reload func() error) *Sync {
	return &Sync{c: c, replica: replica, version: version, reload: reload, wake: make(chan struct{}, 1)}
}

// Start listens for other replicas' announcements and sends this one's,
// until the client is closed.
func (s *Sync) Start() {
	s.c.Subscribe(s.subscriber(), s.channel())
	s.c.Work(s.wake, s.step)
}

// Announce tells the other replicas that this one now runs version. It
// never blocks: the announcement is sent in the background, and kept until
// the store takes it (only the newest one pending is sent).
func (s *Sync) Announce(version string) {
	s.mu.Lock()
	if version == s.known {
		s.mu.Unlock()
		return // a reload that followed another replica's announcement
	}
	s.out = version
	s.mu.Unlock()
	s.poke()
}

// saw records version as published.
func (s *Sync) saw(version string) {
	s.mu.Lock()
	s.known = version
	s.mu.Unlock()
}

func (s *Sync) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sync) channel() string    { return s.c.Key("policy") }
func (s *Sync) versionKey() string { return s.c.Key("policy:version") }

// subscriber follows the channel: each (re)subscription asks for a
// reconcile, since messages may have been missed while it was down.
// Failures are not counted: reloads still happen on each replica's watch.
func (s *Sync) subscriber() state.Subscriber {
	return state.Subscriber{
		Subscribed: func(string) { s.setSync(true); s.poke() },
		Message:    func(_, payload string) { s.received(payload) },
	}
}

// received reloads when another replica announced a version other than ours.
func (s *Sync) received(payload string) {
	var a announcement
	if err := json.Unmarshal([]byte(payload), &a); err != nil || a.Version == "" {
		s.c.Log().Warn("ignoring a malformed policy announcement", "channel", s.channel())
		return
	}
	s.saw(a.Version)
	if a.Replica == s.replica || a.Version == s.version() {
		return
	}
	s.c.Log().Info("another replica reloaded its policy; reloading ours", "from", a.Replica, "version", a.Version, "ours", s.version())
	_ = s.reload() // the policy store logs and counts the outcome
}

// step does the pending work, announcing before reconciling (so a reload
// made while cut off is not undone by the older published version). It
// reports whether more work came meanwhile, and whether something failed
// and must be retried.
func (s *Sync) step(ctx context.Context) (more, failed bool) {
	s.mu.Lock()
	out, sync := s.out, s.sync
	s.mu.Unlock()
	if out != "" {
		if err := s.publish(ctx, out); err != nil {
			return true, true
		}
		s.mu.Lock()
		if s.out == out {
			s.out = ""
		}
		s.mu.Unlock()
	}
	if sync {
		s.setSync(false) // before, so a resubscription meanwhile asks again
		if err := s.reconcile(ctx); err != nil {
			s.setSync(true)
			return true, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out != "" || s.sync, false // asked again meanwhile
}

func (s *Sync) setSync(v bool) {
	s.mu.Lock()
	s.sync = v
	s.mu.Unlock()
}

// publish records version as the published one and announces it.
func (s *Sync) publish(ctx context.Context, version string) error {
	msg, _ := json.Marshal(announcement{Version: version, Replica: s.replica})
	err := s.c.Do(ctx, state.FeaturePolicy, func(ctx context.Context) error {
		_, err := s.c.Redis().TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, s.versionKey(), version, 0)
			p.Publish(ctx, s.channel(), msg)
			return nil
		})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.c.Log().Warn("policy reload not announced to the other replicas yet; retrying when the store is back", "version", version, "err", err)
		}
		return err
	}
	s.saw(version)
	s.c.Log().Info("policy reload announced to the other replicas", "version", version)
	return nil
}

// claimScript publishes a version only where none is: after a store
// restart every replica offers its own, and the first one stands (the
// others learn it from the channel) instead of the last.
var claimScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
`)

// claim publishes version if nothing is published.
func (s *Sync) claim(ctx context.Context, version string) error {
	msg, _ := json.Marshal(announcement{Version: version, Replica: s.replica})
	return s.c.Do(ctx, state.FeaturePolicy, func(ctx context.Context) error {
		return claimScript.Run(ctx, s.c.Redis(), []string{s.versionKey()}, version, s.channel(), msg).Err()
	})
}

// reconcile makes up for announcements missed while disconnected: when the
// published version is not ours, our files are read again. When nothing is
// published (a store that restarted empty), ours is offered (claim), so
// that replicas still on an older policy catch up.
func (s *Sync) reconcile(ctx context.Context) error {
	var published string
	err := s.c.Do(ctx, state.FeaturePolicy, func(ctx context.Context) error {
		v, err := s.c.Redis().Get(ctx, s.versionKey()).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		published = v
		return err
	})
	switch {
	case err != nil:
		return err
	case published == "":
		return s.claim(ctx, s.version())
	}
	s.saw(published)
	if published == s.version() {
		return nil
	}
	s.c.Log().Info("the published policy differs from ours; reloading", "published", published, "ours", s.version())
	_ = s.reload()
	if s.version() == published {
		return nil
	}
	// Our files say otherwise. Either the published version is stale (a
	// replica that missed a reload offered it to an emptied store) or the
	// files differ between replicas: announcing ours makes the others
	// re-read theirs, which settles the first case and shows the second.
	s.c.Log().Warn("after reloading, this replica's policy still differs from the published one; announcing ours "+
		"(if this repeats, the replicas' model.conf and policy.csv differ)", "published", published, "ours", s.version())
	return s.publish(ctx, s.version())
}
