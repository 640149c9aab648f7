package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/state"
)

// Circuit breaker openings travel between replicas as news, never as a
// shared breaker: each replica's breakers count their own calls' outcomes
// (package breaker says why), and when one opens, the replica records
// "server X is open for D more" under a key that expires when the opening
// ends, and announces it on a channel. Every other replica forces its
// breaker of X open for D from when it hears it. Durations, not instants,
// travel: the replicas' clocks need not agree.
//
//	breaker:open:<server>   the replica that opened it; expires (PX) when the opening ends
//	breaker                 the channel: {"server", "replica", "open_ms"}
//
// Nothing here is on a call's path. The breaker hands an opening over
// without waiting (Opened); it is sent in the background, and kept, while
// the store is down, until it is sent or its opening is over. A replica
// that was cut off reads every server's key when it subscribes again, so a
// missed announcement is made up for. While the store is down, each
// replica's breakers decide alone, which is what a single gateway does.
// Closing is not shared: each replica probes the upstream on its own once
// the opening is over, and the key has expired by then.

// breakerNews is the channel's message.
type breakerNews struct {
	Server  string `json:"server"`
	Replica string `json:"replica"`
	OpenMS  int64  `json:"open_ms"`
}

// Sync shares this replica's breaker openings with the others and
// applies theirs.
type Sync struct {
	c       *state.Client
	replica string
	servers []string
	force   func(server string, until time.Time)

	wake    chan struct{}
	failing bool // the last announcement failed (and was logged); only work touches it
	mu      sync.Mutex
	pending map[string]time.Time // openings to announce: server -> end
	catchUp bool                 // read the published openings
}

// New returns the sharing of openings for this replica over c's store;
// Start starts it. replica names this process in announcements; servers are the
// upstreams whose published openings are read on (re)connecting; force
// opens this replica's breaker of server until until (breaker.Set's
// ForceOpen), and is called from a background goroutine.
func New(c *state.Client, replica string, servers []string, force func(server string, until time.Time)) *Sync {
	return &Sync{c: c, replica: replica, servers: servers, force: force,
		wake: make(chan struct{}, 1), pending: map[string]time.Time{}}
}

// Start listens for the other replicas' openings and announces this
// one's, until the client is closed.
func (s *Sync) Start() {
	s.c.Subscribe(s.subscriber(), s.channel())
	s.c.Work(s.wake, s.step)
}

// Opened tells the other replicas that this one's breaker of server opened
// until until (breaker.Set's OnOpen). It never blocks and never touches
// the store: the announcement is sent in the background.
func (s *Sync) Opened(server string, until time.Time) {
	s.mu.Lock()
	if prev, ok := s.pending[server]; !ok || until.After(prev) {
		s.pending[server] = until
	}
	s.mu.Unlock()
	s.poke()
}

func (s *Sync) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sync) channel() string              { return s.c.Key("breaker") }
func (s *Sync) openKey(server string) string { return s.c.Key("breaker:open:" + server) }

// subscriber follows the channel: each (re)subscription asks for a
// catch-up, since announcements may have been missed meanwhile.
func (s *Sync) subscriber() state.Subscriber {
	return state.Subscriber{
		Feature:    state.FeatureBreaker,
		Subscribed: func(string) { s.setCatchUp(true); s.poke() },
		Message:    func(_, payload string) { s.received(payload) },
		Lost:       "not hearing other replicas' circuit breaker openings; each replica's breakers decide alone until the store is back",
		Back:       "hearing other replicas' circuit breaker openings again",
	}
}

// received forces open the breaker another replica announced.
func (s *Sync) received(payload string) {
	var n breakerNews
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.Server == "" || n.OpenMS <= 0 {
		s.c.Log().Warn("ignoring a malformed circuit breaker announcement", "channel", s.channel())
		return
	}
	if n.Replica == s.replica {
		return // our own: the breaker that opened is ours
	}
	s.force(n.Server, time.Now().Add(time.Duration(n.OpenMS)*time.Millisecond))
}

// step announces the pending openings, then catches up when asked. It
// reports whether more work came meanwhile, and whether something failed
// and must be retried.
func (s *Sync) step(ctx context.Context) (more, failed bool) {
	s.mu.Lock()
	pending := make(map[string]time.Time, len(s.pending))
	for server, until := range s.pending {
		pending[server] = until
	}
	catchUp := s.catchUp
	s.mu.Unlock()
	for server, until := range pending {
		if err := s.announce(ctx, server, until); err != nil {
			if ctx.Err() == nil && !s.failing { // once per outage: every retry is counted anyway
				s.c.Log().Warn("circuit breaker opening not shared with the other replicas yet; retrying while it lasts",
					"server", server, "open_for", time.Until(until).Round(time.Millisecond), "err", err)
			}
			s.failing = true
			return true, true
		}
		s.failing = false
		s.mu.Lock()
		if s.pending[server].Equal(until) {
			delete(s.pending, server)
		}
		s.mu.Unlock()
	}
	if catchUp {
		s.setCatchUp(false) // before, so a resubscription meanwhile asks again
		if err := s.readOpenings(ctx); err != nil {
			s.setCatchUp(true)
			return true, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0 || s.catchUp, false
}

func (s *Sync) setCatchUp(v bool) {
	s.mu.Lock()
	s.catchUp = v
	s.mu.Unlock()
}

// announceScript records an opening unless a longer one is recorded, and
// announces it either way (each replica keeps the later end).
// KEYS[1] is the server's key; ARGV is replica, ms, channel, message.
var announceScript = redis.NewScript(`
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`)

// announce records and announces server's opening until until. One that
// is already over is dropped.
func (s *Sync) announce(ctx context.Context, server string, until time.Time) error {
	left := time.Until(until)
	if left <= 0 {
		return nil
	}
	ms := int64((left + time.Millisecond - 1) / time.Millisecond)
	msg, _ := json.Marshal(breakerNews{Server: server, Replica: s.replica, OpenMS: ms})
	err := s.c.Do(ctx, state.FeatureBreaker, func(ctx context.Context) error {
		return announceScript.Run(ctx, s.c.Redis(), []string{s.openKey(server)}, s.replica, ms, s.channel(), msg).Err()
	})
	if err == nil {
		s.c.Log().Info("circuit breaker opening shared with the other replicas", "server", server, "open_for", time.Duration(ms)*time.Millisecond)
	}
	return err
}

// readOpenings makes up for announcements missed while disconnected: every
// server's recorded opening still in force, by another replica, forces
// this replica's breaker open for what is left of it.
func (s *Sync) readOpenings(ctx context.Context) error {
	if len(s.servers) == 0 {
		return nil
	}
	gets := make([]*redis.StringCmd, len(s.servers))
	ttls := make([]*redis.DurationCmd, len(s.servers))
	err := s.c.Do(ctx, state.FeatureBreaker, func(ctx context.Context) error {
		_, err := s.c.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, server := range s.servers {
				gets[i] = p.Get(ctx, s.openKey(server))
				ttls[i] = p.PTTL(ctx, s.openKey(server))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		// Pipelined reports only the first command's error: a missing key
		// (redis.Nil) there would hide a later command's failure, and the
		// catch-up would count as done with servers unread.
		for i := range gets {
			if err := gets[i].Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if err := ttls[i].Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	now := time.Now()
	for i, server := range s.servers {
		replica, err := gets[i].Result()
		left, terr := ttls[i].Result()
		if err != nil || terr != nil || replica == s.replica || left <= 0 {
			continue // none recorded (redis.Nil), or ours, or over
		}
		s.c.Log().Info("another replica's circuit breaker is open; opening ours until it ends", "server", server, "from", replica, "open_for", left)
		s.force(server, now.Add(left))
	}
	return nil
}
