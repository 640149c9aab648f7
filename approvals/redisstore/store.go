package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/state"
)

// Approval requests shared by replicas (an approvals.Store). Under the prefix:
//
//	apr:req:<id>        a hash per request: doc (the JSON of what never changes: id, principal, tool,
//	                    args_hash, args, rule, rule_digest, policy_version), state, created, exp,
//	                    decided (ms of Redis's clock), ttl (ms: how long it and its decision live), by,
//	                    reason, idx (the name of its index key), and while it is used, use (the token of
//	                    the check that consumed it, for Restore) and appr (when it had been approved, ms).
//	                    It lives until its expiry plus approvals.FinishedRetention, for List.
//	apr:idx:<sha256>    the id of the request in force for one (principal, tool, args_hash, rule_digest), until that
//	                    request expires; consuming an approval deletes it
//	apr:last:<sha256>   the id of the last request made for the binding of the same apr:idx key, until
//	                    that request's expiry plus approvals.FinishedRetention: a new request names it
//	                    when it expired, so the agent learns why it is asked again
//	apr:active          a sorted set of the ids in force, by expiry: bounds them (approvals.MaxActive)
//	apr:all             a sorted set of every id kept, by creation: List's order
//
// Every decision (Check, Approve, Deny, Restore) is one Lua script: Redis runs it alone, so two replicas
// that check the same approved call at once cannot both consume it, an approval cannot race a denial, and
// a restore cannot race a check.
// The scripts name the request hash from the id they read, which a Redis Cluster would refuse; toolgate
// targets a single server (or a primary with replicas).

// approvalCheckScript is Check. KEYS: the index key, apr:active, apr:all, the last key. ARGV: a new id,
// its doc, ttl (ms), retention (ms), max active, the request key prefix. Replies {outcome, id, hash
// fields...} with outcome proceed, denied or pending; {"created", id, the last request's id or "",
// hash fields...} for a new pending request; or {"full"}. Consuming an approval records the new id, which no
// request takes then, as the consumption's token (use).
const approvalCheckScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local id = redis.call('GET', KEYS[1])
if id then
  local rk = ARGV[6] .. id
  local h = redis.call('HMGET', rk, 'state', 'exp', 'decided')
  if h[1] and now < tonumber(h[2]) then
    local out = 'pending'
    if h[1] == 'approved' then
      redis.call('HSET', rk, 'state', 'used', 'decided', now, 'use', ARGV[1], 'appr', h[3] or now)
      redis.call('ZREM', KEYS[2], id)
      redis.call('DEL', KEYS[1])
      out = 'proceed'
    elseif h[1] == 'denied' then
      out = 'denied'
    end
    local reply = {out, id}
    for _, v in ipairs(redis.call('HGETALL', rk)) do table.insert(reply, v) end
    return reply
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return {'full'} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl - keep)
local rk = ARGV[6] .. ARGV[1]
redis.call('HSET', rk, 'doc', ARGV[2], 'state', 'pending', 'created', now, 'exp', now + ttl, 'ttl', ttl, 'idx', KEYS[1])
redis.call('PEXPIRE', rk, ttl + keep)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
local prev = redis.call('GET', KEYS[4]) or ''
redis.call('SET', KEYS[4], ARGV[1], 'PX', ttl + keep)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
local reply = {'created', ARGV[1], prev}
for _, v in ipairs(redis.call('HGETALL', rk)) do table.insert(reply, v) end
return reply
`

// approvalDecideScript is Approve and Deny. KEYS: the request hash, apr:active. ARGV: the id, the new
// state, by, reason, ttl (ms: the store's, for requests created without one of their own), retention
// (ms). Replies {"ok", hash fields...}, {"notfound"},
// {"expired"}, or {"decided", state}.
const approvalDecideScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'state', 'exp', 'idx', 'ttl')
if not h[1] then return {'notfound'} end
if h[1] == 'pending' and now >= tonumber(h[2]) then return {'expired'} end
if h[1] ~= 'pending' then return {'decided', h[1]} end
local ttl, keep = tonumber(h[4] or ARGV[5]), tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'decided', now, 'by', ARGV[3], 'reason', ARGV[4], 'exp', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl + keep)
if redis.call('GET', h[3]) == ARGV[1] then redis.call('PEXPIRE', h[3], ttl) end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
local reply = {'ok'}
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do table.insert(reply, v) end
return reply
`

// approvalRestoreScript is Restore. KEYS: the request hash, apr:active. ARGV: the id, the consumption's
// token. Only the consumption that token names is undone, before the expiry, and only while no other
// request holds the index (an identical call asked for a new approval meanwhile). Replies
// {"ok", hash fields...}, {"notfound"}, {"notused", state}, {"expired"} or {"superseded"}.
const approvalRestoreScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'state', 'exp', 'idx', 'use', 'appr')
if not h[1] then return {'notfound'} end
if h[1] ~= 'used' or h[4] ~= ARGV[2] then return {'notused', h[1]} end
local exp = tonumber(h[2])
if now >= exp then return {'expired'} end
if redis.call('EXISTS', h[3]) == 1 then return {'superseded'} end
redis.call('HSET', KEYS[1], 'state', 'approved', 'decided', h[5])
redis.call('HDEL', KEYS[1], 'use', 'appr')
redis.call('SET', h[3], ARGV[1], 'PX', exp - now)
redis.call('ZADD', KEYS[2], exp, ARGV[1])
local reply = {'ok'}
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do table.insert(reply, v) end
return reply
`

var (
	approvalCheck   = redis.NewScript(approvalCheckScript)
	approvalDecide  = redis.NewScript(approvalDecideScript)
	approvalRestore = redis.NewScript(approvalRestoreScript)
)

// Store is the approvals.Store of replicas sharing the store (see the key layout above). Its
// failures wrap approvals.ErrUnavailable: the gateway then refuses calls that need an approval (never
// runs them), and the admin API answers 503.
type Store struct {
	c   *state.Client
	ttl time.Duration

	onDecision atomic.Pointer[func(approvals.Request)]
}

var _ approvals.Store = (*Store)(nil)

// New returns the approval store in c's store; ttl is how long pending and approved requests live
// (approvals.ttl).
func New(c *state.Client, ttl time.Duration) *Store {
	return &Store{c: c, ttl: ttl}
}

// OnDecision implements approvals.Store: fn sees the decisions made through this replica.
func (a *Store) OnDecision(fn func(approvals.Request)) { a.onDecision.Store(&fn) }

// requestDoc is the part of a request that never changes, as one JSON value.
type requestDoc struct {
	ID        string          `json:"id"`
	Principal string          `json:"principal"`
	Tool      string          `json:"tool"`
	ArgsHash  string          `json:"args_hash"`
	Args      json.RawMessage `json:"args,omitempty"`
	Rule      string          `json:"rule,omitempty"`
	// RuleDigest and PolicyVersion: see approvals.Request.
	RuleDigest    string `json:"rule_digest,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
}

func (a *Store) reqKey(id string) string { return a.c.Key("apr:req:" + id) }

// bindingKeys are the index and last keys of the (principal, tool, args_hash, rule_digest) binding,
// named by a hash of a length-prefixed encoding, so no two bindings share them. A call held under
// another version of its rule finds other keys, so a request (or an approval) given under the old
// one does not decide it.
func (a *Store) bindingKeys(principal, tool, argsHash, ruleDigest string) (index, last string) {
	h := sha256.New()
	for _, f := range []string{principal, tool, argsHash, ruleDigest} {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return a.c.Key("apr:idx:" + sum), a.c.Key("apr:last:" + sum)
}

// Check implements approvals.Store, in one script.
func (a *Store) Check(ctx context.Context, call approvals.Call) (approvals.Outcome, approvals.Request, error) {
	id, err := newRequestID()
	if err != nil {
		return 0, approvals.Request{}, err
	}
	doc, err := json.Marshal(requestDoc{ID: id, Principal: call.Principal, Tool: call.Tool, ArgsHash: call.ArgsHash, Args: call.Args,
		Rule: call.Rule, RuleDigest: call.RuleDigest, PolicyVersion: call.PolicyVersion})
	if err != nil {
		return 0, approvals.Request{}, err
	}
	ttl := cmp.Or(call.TTL, a.ttl)
	idx, last := a.bindingKeys(call.Principal, call.Tool, call.ArgsHash, call.RuleDigest)
	reply, err := a.run(ctx, approvalCheck, []string{idx, a.c.Key("apr:active"), a.c.Key("apr:all"), last},
		id, doc, ms(ttl), ms(approvals.FinishedRetention), approvals.MaxActive, a.reqKey(""))
	if err != nil {
		return 0, approvals.Request{}, err
	}
	if len(reply) == 1 && reply[0] == "full" {
		return 0, approvals.Request{}, approvals.ErrTooMany
	}
	if len(reply) < 2 {
		return 0, approvals.Request{}, fmt.Errorf("approval check script: unexpected reply %v", reply)
	}
	if reply[0] == "created" && len(reply) >= 3 {
		r, err := requestFrom(reply[3:])
		if err != nil {
			return 0, approvals.Request{}, err
		}
		r.Created = true
		if prev, _ := reply[2].(string); prev != "" {
			r.Lapsed = a.lapsed(prev)
		}
		return approvals.Pending, r, nil
	}
	r, err := requestFrom(reply[2:])
	if err != nil {
		return 0, approvals.Request{}, err
	}
	switch reply[0] {
	case "proceed":
		r.Consumption = id // the token the script recorded
		return approvals.Proceed, r, nil
	case "denied":
		return approvals.Denied, r, nil
	case "pending":
		return approvals.Pending, r, nil
	}
	return 0, approvals.Request{}, fmt.Errorf("approval check script: unexpected reply %v", reply[0])
}

// lapsed is the request id if it expired, else nil; a failure to read it is nil too (it only
// words the answer).
func (a *Store) lapsed(id string) *approvals.Request {
	r, err := a.Get(id)
	if err != nil || r.State != approvals.StateExpired {
		return nil
	}
	r.Args = nil
	return &r
}

// Approve implements approvals.Store.
func (a *Store) Approve(id, by string) (approvals.Request, error) {
	return a.decide(id, approvals.StateApproved, by, "")
}

// Deny implements approvals.Store. The reason is capped as the file store caps it.
func (a *Store) Deny(id, by, reason string) (approvals.Request, error) {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	return a.decide(id, approvals.StateDenied, by, reason)
}

func (a *Store) decide(id string, to approvals.State, by, reason string) (approvals.Request, error) {
	reply, err := a.run(context.Background(), approvalDecide, []string{a.reqKey(id), a.c.Key("apr:active")},
		id, string(to), by, reason, ms(a.ttl), ms(approvals.FinishedRetention))
	if err != nil {
		return approvals.Request{}, err
	}
	switch {
	case len(reply) == 1 && reply[0] == "notfound":
		return approvals.Request{}, approvals.ErrNotFound
	case len(reply) == 1 && reply[0] == "expired":
		return approvals.Request{}, approvals.ErrExpired
	case len(reply) == 2 && reply[0] == "decided":
		return approvals.Request{}, fmt.Errorf("%w: it is %v", approvals.ErrNotPending, reply[1])
	case len(reply) > 1 && reply[0] == "ok":
		return a.report(reply[1:], "")
	}
	return approvals.Request{}, fmt.Errorf("approval decide script: unexpected reply %v", reply)
}

// Restore implements approvals.Store, in one script.
func (a *Store) Restore(ctx context.Context, used approvals.Request) (approvals.Request, error) {
	if used.Consumption == "" {
		return approvals.Request{}, fmt.Errorf("%w: not a consumption reported by Check", approvals.ErrNotRestorable)
	}
	reply, err := a.run(ctx, approvalRestore, []string{a.reqKey(used.ID), a.c.Key("apr:active")}, used.ID, used.Consumption)
	if err != nil {
		return approvals.Request{}, err
	}
	switch {
	case len(reply) == 1 && reply[0] == "notfound":
		return approvals.Request{}, approvals.ErrNotFound
	case len(reply) == 1 && reply[0] == "expired":
		return approvals.Request{}, fmt.Errorf("%w: %w", approvals.ErrNotRestorable, approvals.ErrExpired)
	case len(reply) == 1 && reply[0] == "superseded":
		return approvals.Request{}, fmt.Errorf("%w: a newer request for the same call is in force", approvals.ErrNotRestorable)
	case len(reply) == 2 && reply[0] == "notused":
		return approvals.Request{}, fmt.Errorf("%w: it is %v, not used by that call", approvals.ErrNotRestorable, reply[1])
	case len(reply) > 1 && reply[0] == "ok":
		return a.report(reply[1:], approvals.RestoredReason)
	}
	return approvals.Request{}, fmt.Errorf("approval restore script: unexpected reply %v", reply)
}

// run runs one of the approval scripts; an unreachable store is
// ErrUnavailable (see unavailable).
func (a *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]any, error) {
	var reply []any
	err := a.c.Do(ctx, state.FeatureApprovals, func(ctx context.Context) error {
		var err error
		reply, err = script.Run(ctx, a.c.Redis(), keys, args...).Slice()
		return err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return reply, nil
}

// report decodes the request a decision or restore script returned and
// tells OnDecision, with reason when it is not the request's own.
func (a *Store) report(fields []any, reason string) (approvals.Request, error) {
	r, err := requestFrom(fields)
	if err != nil {
		return approvals.Request{}, err
	}
	if fn := a.onDecision.Load(); fn != nil {
		reported := r
		if reason != "" {
			reported.Reason = reason
		}
		(*fn)(reported)
	}
	return r, nil
}

// Get implements approvals.Store.
func (a *Store) Get(id string) (approvals.Request, error) {
	var fields map[string]string
	err := a.c.Do(context.Background(), state.FeatureApprovals, func(ctx context.Context) error {
		var err error
		fields, err = a.c.Redis().HGetAll(ctx, a.reqKey(id)).Result()
		return err
	})
	if err != nil {
		return approvals.Request{}, unavailable(err)
	}
	if len(fields) == 0 {
		return approvals.Request{}, approvals.ErrNotFound
	}
	r, err := requestFromMap(fields)
	if err != nil {
		return approvals.Request{}, err
	}
	expire(&r, time.Now())
	return r, nil
}

// List implements approvals.Store: every request kept, oldest first, read in one round trip after
// the index. When the store cannot be read it fails with approvals.ErrUnavailable: an old copy could
// show a request as pending that another replica decided, or none at all.
func (a *Store) List(states ...approvals.State) ([]approvals.Request, error) {
	all, err := a.list()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := []approvals.Request{}
	for _, r := range all {
		expire(&r, now)
		if len(states) == 0 || slices.Contains(states, r.State) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (a *Store) list() ([]approvals.Request, error) {
	var records []map[string]string
	err := a.c.Do(context.Background(), state.FeatureApprovals, func(ctx context.Context) error {
		records = records[:0]
		ids, err := a.c.Redis().ZRange(ctx, a.c.Key("apr:all"), 0, -1).Result()
		if err != nil {
			return err
		}
		pipe := a.c.Redis().Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HGetAll(ctx, a.reqKey(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		var gone []any
		for i, cmd := range cmds {
			if len(cmd.Val()) == 0 {
				gone = append(gone, ids[i]) // expired past its retention
				continue
			}
			records = append(records, cmd.Val())
		}
		if len(gone) > 0 {
			a.c.Redis().ZRem(ctx, a.c.Key("apr:all"), gone...)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(err)
	}
	// A record that cannot be read is the store's content, not its reachability: a plain error.
	out := make([]approvals.Request, 0, len(records))
	for _, m := range records {
		r, err := requestFromMap(m)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// expire shows a pending or approved request past its expiry as expired, as the file store does.
func expire(r *approvals.Request, now time.Time) {
	if (r.State == approvals.StatePending || r.State == approvals.StateApproved) && !now.Before(r.ExpiresAt) {
		r.State, r.DecidedAt = approvals.StateExpired, r.ExpiresAt
	}
}

// unavailable marks a store failure for the gateway (refuse the call) and the admin API (503).
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", approvals.ErrUnavailable, err)
}

// requestFrom reads a request from HGETALL's flat field, value list.
func requestFrom(flat []any) (approvals.Request, error) {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return requestFromMap(m)
}

func requestFromMap(m map[string]string) (approvals.Request, error) {
	var d requestDoc
	if err := json.Unmarshal([]byte(m["doc"]), &d); err != nil {
		return approvals.Request{}, fmt.Errorf("approval request in the store: %w", err)
	}
	st, err := approvals.ParseState(m["state"])
	if err != nil {
		return approvals.Request{}, fmt.Errorf("approval request %s in the store: %w", d.ID, err)
	}
	r := approvals.Request{ID: d.ID, Principal: d.Principal, Tool: d.Tool, ArgsHash: d.ArgsHash, Args: d.Args, Rule: d.Rule,
		RuleDigest: d.RuleDigest, PolicyVersion: d.PolicyVersion, State: st, Reason: m["reason"], DecidedBy: m["by"]}
	if v, ok := m["ttl"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return approvals.Request{}, errors.New("approval request in the store: bad ttl")
		}
		r.TTL = time.Duration(n) * time.Millisecond
	}
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"created", &r.CreatedAt}, {"exp", &r.ExpiresAt}, {"decided", &r.DecidedAt}} {
		if v, ok := m[f.name]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return approvals.Request{}, errors.New("approval request in the store: bad " + f.name)
			}
			*f.to = time.UnixMilli(n).UTC()
		}
	}
	return r, nil
}

// newRequestID is "apr_" and 16 random bytes, as the file store's.
func newRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "apr_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
