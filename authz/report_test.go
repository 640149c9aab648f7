package authz

import (
	"fmt"
	"testing"
)

// Access is Decide's answer where no conditional line can match, "conditional" where arguments
// decide, and denied wherever no arguments can allow the call.
func TestAccess(t *testing.T) {
	p := loadWith(t, "", `p, support, orders/cancel, call, deny
p, support, orders/*, call, allow
p, support, orders/refund, call, allow, amount <= 100
p, viewer, orders/get, call, allow
p, viewer, orders/get, call, deny, order_id == 7
p, lead, orders/refund, call, deny, amount > 1000
g, alice, support
g, bob, viewer
g, carol, lead
`, Options{Servers: []string{"orders"}})
	for _, tc := range []struct{ principal, obj, want string }{
		{"alice", "orders/get", AccessAllowed},
		{"alice", "orders/cancel", AccessDenied},
		{"alice", "orders/refund", AccessAllowed}, // an unconditional allow (orders/*) and no conditional deny
		{"bob", "orders/get", AccessConditional},  // a conditional deny beside the allow
		{"bob", "orders/refund", AccessDenied},
		{"carol", "orders/refund", AccessDenied}, // only a conditional deny: nothing allows it
		{"support", "orders/get", AccessDenied},  // a role is not a principal
		{"nobody", "orders/get", AccessDenied},
	} {
		if got := p.Access(tc.principal, tc.obj); got != tc.want {
			t.Errorf("Access(%s, %s) = %s, want %s", tc.principal, tc.obj, got, tc.want)
		}
	}
	if got := fmt.Sprint(p.KnownPrincipals()); got != "[alice bob carol]" {
		t.Errorf("KnownPrincipals = %s", got)
	}
}

// Compare lists the lines added and removed (a moved or respaced line is neither; an edited one
// is both) and the pairs whose access widens or narrows; two conditional accesses are unchanged.
func TestCompare(t *testing.T) {
	o := Options{Servers: []string{"orders"}}
	old := loadWith(t, "", `p, support, orders/cancel, call, deny
p, support, orders/*, call, allow
p, viewer, orders/get, call, allow, order_id < 10
g, alice, support
g, bob, viewer
a, support, orders/refund, call, amount > 50
`, o)
	next := loadWith(t, "", `g, alice, support
p, support, orders/*, call, allow
p, viewer, orders/get, call, allow, order_id < 20
p,  viewer, orders/list, call, allow
g, bob, viewer
a, support, orders/refund, call, amount > 50
p, alice, orders/get, call, deny
`, o)
	c := Compare(old, next, []string{"orders/get", "orders/cancel", "orders/list"})
	if got, want := fmt.Sprint(c.Removed), "[p, support, orders/cancel, call, deny p, viewer, orders/get, call, allow, order_id < 10]"; got != want {
		t.Errorf("Removed %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.Added), "[p, viewer, orders/get, call, allow, order_id < 20 p,  viewer, orders/list, call, allow p, alice, orders/get, call, deny]"; got != want {
		t.Errorf("Added %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.Gained), "[{alice orders/cancel denied allowed} {bob orders/list denied allowed}]"; got != want {
		t.Errorf("Gained %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.Lost), "[{alice orders/get allowed denied}]"; got != want {
		t.Errorf("Lost %s, want %s", got, want)
	}
	if c.Truncated {
		t.Error("truncated")
	}
}
