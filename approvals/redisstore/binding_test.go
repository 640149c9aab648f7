package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/redistest"
)

func checkCall(t *testing.T, a *Store, c approvals.Call, want approvals.Outcome) approvals.Request {
	t.Helper()
	out, r, err := a.Check(context.Background(), c)
	if err != nil || out != want {
		t.Fatalf("Check: %v, %v (want %v)", out, err, want)
	}
	return r
}

// As in the file store: a request is bound to the version of its rule, carries the rule's ttl
// (pending, then approved, for that long), and is Created only by the check that made it.
func TestBoundToTheRuleVersionWithItsTTL(t *testing.T) {
	srv := redistest.Start(t)
	c1, _ := redistest.Open(t, srv, "t:")
	c2, _ := redistest.Open(t, srv, "t:")
	a, b := New(c1, time.Hour), New(c2, time.Hour)
	call := approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: "h1", Args: refundArgs, Rule: "policy.csv:3",
		RuleDigest: "d-old", PolicyVersion: "v1", TTL: 5 * time.Minute}
	first := checkCall(t, a, call, approvals.Pending)
	if !first.Created || first.RuleDigest != "d-old" || first.PolicyVersion != "v1" || first.TTL != 5*time.Minute ||
		first.ExpiresAt.Sub(first.CreatedAt) != 5*time.Minute {
		t.Fatalf("new request %+v", first)
	}
	if again := checkCall(t, b, call, approvals.Pending); again.Created || again.ID != first.ID {
		t.Fatalf("the repeat through another replica: %+v", again)
	}
	approved, err := b.Approve(first.ID, "carol")
	if err != nil || approved.ExpiresAt.Sub(approved.DecidedAt) != 5*time.Minute {
		t.Fatalf("approved %+v %v: want it to live the rule's 5m", approved, err)
	}
	edited := call
	edited.RuleDigest = "d-new"
	if r := checkCall(t, a, edited, approvals.Pending); r.ID == first.ID || !r.Created {
		t.Fatalf("under the edited rule: %+v, want a new request", r)
	}
	if got, err := a.Get(first.ID); err != nil || got.State != approvals.StateApproved {
		t.Fatalf("the approval under the old rule: %+v %v", got, err)
	}
	if used := checkCall(t, b, call, approvals.Proceed); used.ID != first.ID {
		t.Fatalf("consumed %s, want %s", used.ID, first.ID)
	}
}

// As in the file store, a request made after the last one for the call expired names it. Redis's
// own clock expires requests here, so the ttl is the shortest the store accepts (1 ms) and the
// test waits until Redis has dropped the first one's index key.
func TestLapsedRequestNamed(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "t:")
	a := New(c, time.Hour)
	call := approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: "h1", Args: refundArgs, RuleDigest: "d", TTL: time.Millisecond}
	first := checkCall(t, a, call, approvals.Pending)
	if first.Lapsed != nil {
		t.Fatalf("the first request names %+v", first.Lapsed)
	}
	idx, _ := a.bindingKeys(call.Principal, call.Tool, call.ArgsHash, call.RuleDigest)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool { // the request lapsed by Redis's clock
		n, err := rdb.Exists(context.Background(), idx).Result()
		return err == nil && n == 0
	})
	second := checkCall(t, a, call, approvals.Pending)
	if second.ID == first.ID || second.Lapsed == nil || second.Lapsed.ID != first.ID {
		t.Fatalf("second %+v, lapsed %+v", second, second.Lapsed)
	}
}
