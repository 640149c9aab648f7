package toolsets

import (
	"net/http"
	"strings"
	"testing"
)

func TestSetHas(t *testing.T) {
	s := &Set{Name: "support", Tools: []string{"orders/*", "*/read_*"}, Exclude: []string{"orders/refund_*"}}
	for id, want := range map[string]bool{
		"orders/get_order":    true,
		"fs/read_file":        true,
		"orders/refund_order": false, // excluded
		"fs/write_file":       false,
		"ordersx/get_order":   false, // * never crosses the /
	} {
		if got := s.Has(id); got != want {
			t.Errorf("Has(%q) = %v, want %v", id, got, want)
		}
	}
	var none *Set
	if !none.Has("anything/at_all") || none.Discovers() || none.Label() != "" {
		t.Error("the nil set must hold every tool and ask for no discovery")
	}
}

func TestSelectFirstMatchWins(t *testing.T) {
	ide, support, all := &Set{Name: "ide"}, &Set{Name: "support"}, &Set{Name: "all"}
	sel := New(Options{Rules: []Rule{
		{Client: "cursor*", Set: ide},
		{Headers: map[string]string{"X-Toolset": "support"}, Set: support},
		{Role: "support_agent", Principal: "a*", Set: support},
		{Principal: "ci", Set: all},
	}})
	rolesAsked := 0
	roles := func(r ...string) func() []string {
		return func() []string { rolesAsked++; return r }
	}
	h := http.Header{}
	h.Set("x-toolset", "support")
	tests := []struct {
		name string
		req  Request
		want *Set
		rule int
	}{
		{"client", Request{Principal: "alice", Client: "cursor-vscode", Header: h}, ide, 0},
		{"header, case-insensitive name", Request{Principal: "bob", Client: "claude-code", Header: h}, support, 1},
		{"role and principal", Request{Principal: "alice", Roles: roles("viewer", "support_agent")}, support, 2},
		{"role without the principal", Request{Principal: "bob", Roles: roles("support_agent")}, nil, -1},
		{"principal", Request{Principal: "ci", Roles: roles()}, all, 3},
		{"a client without a name is not *", Request{Principal: "zed"}, nil, -1},
	}
	for _, tt := range tests {
		got, i := sel.Select(tt.req)
		if got != tt.want || i != tt.rule {
			t.Errorf("%s: got %v rule %d, want %v rule %d", tt.name, got.Label(), i, tt.want.Label(), tt.rule)
		}
	}
	if rolesAsked != 3 {
		t.Errorf("roles asked %d times, want once per request that reached a role rule (3)", rolesAsked)
	}
	star := New(Options{Rules: []Rule{{Client: "*", Set: ide}}})
	if got, _ := star.Select(Request{Principal: "p"}); got != nil {
		t.Errorf("client * matched a client that gave no name: %v", got.Label())
	}
	var nilSel *Selector
	if got, i := nilSel.Select(Request{Principal: "p"}); got != nil || i != -1 || !nilSel.Empty() {
		t.Error("a nil selector picks nothing")
	}
}

func TestUnmatched(t *testing.T) {
	s := &Set{Tools: []string{"orders/*", "orders/get_ordr", "crm/*"}, Exclude: []string{"orders/refund_*", "orders/x"}}
	got := s.Unmatched([]string{"orders/get_order", "orders/refund_order"})
	if strings.Join(got, ",") != "orders/get_ordr,crm/*,orders/x" {
		t.Errorf("Unmatched = %v", got)
	}
}
