package authz

import "testing"

// ArgsMatter is true exactly when a line matching the subject, object and action has a condition
// on the arguments: a condition on the principal alone, or on another subject's line, does not count.
func TestArgsMatter(t *testing.T) {
	p := loadWith(t, "", `p, support_agent, orders/refund_order, call, allow, amount <= 100
p, support_agent, orders/get_order, call, allow
p, viewer, orders/list_orders, call, allow, principal.region == 'eu'
p, viewer, orders/get_order, call, allow
p, auditor, orders/get_order, call, deny, 'secret' in args
a, viewer, orders/get_order, call, order_id > 100
g, alice, support_agent
g, bob, viewer
`, Options{})
	for _, tc := range []struct {
		sub  Subject
		obj  string
		want bool
	}{
		{Subject{Principal: "alice"}, "orders/refund_order", true},
		{Subject{Principal: "alice"}, "orders/get_order", false},
		{Subject{Principal: "bob"}, "orders/list_orders", false}, // principal.region only
		{Subject{Principal: "bob"}, "orders/get_order", true},    // the a line
		{Subject{Principal: "carol"}, "orders/refund_order", false},
		{Subject{Principal: "carol", Roles: []string{"support_agent"}}, "orders/refund_order", true},
		{Subject{Principal: "carol", Roles: []string{"auditor"}}, "orders/get_order", true},
		{Subject{Principal: "viewer"}, "orders/get_order", false}, // a role as principal: always denied
	} {
		if got := p.ArgsMatter(tc.sub, tc.obj, ActCall); got != tc.want {
			t.Errorf("ArgsMatter(%+v, %s) = %v, want %v", tc.sub, tc.obj, got, tc.want)
		}
	}
	if p.ArgsMatter(Subject{Principal: "alice"}, "orders/refund_order", "read") {
		t.Error("a call line's condition counts for read")
	}
}
