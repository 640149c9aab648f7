package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/ratelimit"
	"github.com/toolgate/toolgate/state"
)

// takeScript checks every bucket and takes one token from each, or none,
// in one atomic step: Redis runs a script alone, so two replicas can never
// both take a bucket's last token.
//
// A bucket is a hash {t: tokens, ts: microseconds of the last update}. A
// missing bucket is full, so each key expires when it would be full again
// (an idle bucket costs nothing, as in memory). Time is Redis's own clock
// (TIME), the one all replicas share, unless the caller passes one (tests).
//
// KEYS[i] is bucket i; ARGV[1] is now in microseconds, or "" for TIME;
// ARGV[2i] and ARGV[2i+1] are bucket i's rate (tokens per second) and
// burst. The reply is {1} when every bucket gave a token, else {0, i, wait}:
// nothing was taken, and bucket i has the longest wait, in microseconds,
// until it holds a token again.
const takeScript = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tokens, stamps = {}, {}
local worst, longest = 0, 0
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2*i]), tonumber(ARGV[2*i+1])
  local held = redis.call('HMGET', key, 't', 'ts')
  local t, ts = tonumber(held[1]), tonumber(held[2])
  if not t or not ts then
    t, ts = burst, now
  elseif now > ts then
    t, ts = t + (now - ts) * rate / 1000000, now
  end
  if t > burst then t = burst end
  tokens[i], stamps[i] = t, ts
  if t < 1 then
    local wait = math.ceil((1 - t) * 1000000 / rate)
    if wait > longest then worst, longest = i, wait end
  end
end
if worst > 0 then return {0, worst, longest} end
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2*i]), tonumber(ARGV[2*i+1])
  local t = tokens[i] - 1
  redis.call('HSET', key, 't', t, 'ts', stamps[i])
  redis.call('PEXPIRE', key, math.max(1, math.ceil((burst - t) * 1000 / rate)))
end
return {1}
`

var take = redis.NewScript(takeScript)

// Limiter is a ratelimit.Limiter whose buckets live in the store, so a
// limit holds across every replica: the same all-or-none token buckets as
// ratelimit.Memory, and the same waits.
type Limiter struct {
	c   *state.Client
	now func() time.Time // nil: Redis's clock
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock makes the limiter pass now to the script instead of using
// Redis's clock, so tests can move time without waiting for it.
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) { l.now = now }
}

// New returns the limiter over the buckets of c's store.
func New(c *state.Client, opts ...Option) *Limiter {
	l := &Limiter{c: c}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Take implements ratelimit.Limiter. It fails (nothing decided) when the
// store is down or does not answer within the operation timeout; what the
// call then meets is the caller's choice (state.rate_limits_on_failure).
func (l *Limiter) Take(ctx context.Context, buckets []ratelimit.Bucket) (ratelimit.Verdict, error) {
	if len(buckets) == 0 {
		return ratelimit.Verdict{Allowed: true}, nil
	}
	keys, args := l.scriptInput(buckets)
	var reply []any
	err := l.c.Do(ctx, state.FeatureRateLimits, func(ctx context.Context) error {
		var err error
		reply, err = take.Run(ctx, l.c.Redis(), keys, args...).Slice()
		return err
	})
	if err != nil {
		return ratelimit.Verdict{}, err
	}
	return verdict(reply, buckets)
}

func (l *Limiter) scriptInput(buckets []ratelimit.Bucket) (keys []string, args []any) {
	keys = make([]string, len(buckets))
	args = make([]any, 1, 1+2*len(buckets))
	if l.now != nil {
		args[0] = l.now().UnixMicro()
	} else {
		args[0] = ""
	}
	for i, b := range buckets {
		keys[i] = l.c.Key("rl:" + b.Key)
		args = append(args, strconv.FormatFloat(b.PerSecond, 'g', -1, 64), b.Burst)
	}
	return keys, args
}

// verdict reads the script's reply.
func verdict(reply []any, buckets []ratelimit.Bucket) (ratelimit.Verdict, error) {
	ints := make([]int64, len(reply))
	for i, v := range reply {
		n, ok := v.(int64)
		if !ok {
			return ratelimit.Verdict{}, fmt.Errorf("rate-limit script: unexpected reply %v", reply)
		}
		ints[i] = n
	}
	switch {
	case len(ints) == 1 && ints[0] == 1:
		return ratelimit.Verdict{Allowed: true}, nil
	case len(ints) == 3 && ints[0] == 0 && ints[1] >= 1 && int(ints[1]) <= len(buckets):
		return ratelimit.Verdict{RetryAfter: time.Duration(ints[2]) * time.Microsecond, Denied: buckets[ints[1]-1]}, nil
	}
	return ratelimit.Verdict{}, fmt.Errorf("rate-limit script: unexpected reply %v", reply)
}
