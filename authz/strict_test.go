package authz

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// condCase is one call checked against a one-condition line.
type condCase struct {
	args    string
	want    bool   // allowed
	condErr string // "" no condition error; else a substring of it
}

// checkCond loads "p, r, s/t, call, <eft>, <cond>" (a deny line also gets an unconditional allow
// beside it, so that the deny is what decides) and runs the cases as principal u (g, u, r).
func checkCond(t *testing.T, eft, cond string, cases []condCase) {
	t.Helper()
	policy := fmt.Sprintf("p, r, s/t, call, %s, \"%s\"\ng, u, r\n", eft, strings.ReplaceAll(cond, `"`, `""`))
	if eft == effectDeny {
		policy = "p, r, s/t, call, allow\n" + policy
	}
	p := loadWith(t, "", policy, Options{})
	for _, c := range cases {
		d := p.Decide(req("u", "s/t", c.args))
		if d.Internal != nil {
			t.Errorf("%s, %s on %s: internal %v", eft, cond, c.args, d.Internal)
			continue
		}
		if d.Allowed != c.want {
			t.Errorf("%s, %s on %s: allowed %v, want %v (cond error %v)", eft, cond, c.args, d.Allowed, c.want, d.CondErr)
		}
		switch {
		case c.condErr == "" && d.CondErr != nil:
			t.Errorf("%s, %s on %s: unexpected cond error %v", eft, cond, c.args, d.CondErr)
		case c.condErr != "" && (d.CondErr == nil || !strings.Contains(d.CondErr.Error(), c.condErr)):
			t.Errorf("%s, %s on %s: cond error %v, want %q", eft, cond, c.args, d.CondErr, c.condErr)
		}
	}
}

// TestArithmeticOverflowFailsClosed: integer overflow in a condition is an evaluation error (it
// used to wrap around: 4611686018427387905 * 4 is 4, so quantity * price <= 1000 held).
func TestArithmeticOverflowFailsClosed(t *testing.T) {
	const ovf = "overflows"
	checkCond(t, "allow", "quantity * price <= 1000", []condCase{
		{`{"quantity": 2, "price": 400}`, true, ""},
		{`{"quantity": 2, "price": 600}`, false, ""},
		{`{"quantity": 4611686018427387905, "price": 4}`, false, ovf},
		{`{"quantity": 4611686018427387904, "price": 2}`, false, ovf},
		{`{"quantity": 9223372036854775807, "price": 2}`, false, ovf},
		{`{"quantity": -9223372036854775808, "price": -1}`, false, ovf},
		{`{"quantity": -1, "price": -9223372036854775808}`, false, ovf},
		{`{"quantity": 0, "price": -9223372036854775808}`, true, ""},
		{`{"quantity": 2.5, "price": 400}`, true, ""},
		{`{"quantity": 1e300, "price": 1e300}`, false, ovf}, // +Inf
	})
	checkCond(t, "allow", "amount + fee <= 100", []condCase{
		{`{"amount": 90, "fee": 10}`, true, ""},
		{`{"amount": 9223372036854775807, "fee": 1}`, false, ovf},
		{`{"amount": -9223372036854775808, "fee": -1}`, false, ovf},
		{`{"amount": -1.7976931348623157e308, "fee": -1.7976931348623157e308}`, false, ovf}, // -Inf
	})
	checkCond(t, "allow", "limit - amount >= 0", []condCase{
		{`{"limit": 100, "amount": 100}`, true, ""},
		{`{"limit": 100, "amount": -9223372036854775808}`, false, ovf},
		{`{"limit": -9223372036854775808, "amount": 1}`, false, ovf},
	})
	checkCond(t, "allow", "-amount >= -100", []condCase{
		{`{"amount": 100}`, true, ""},
		{`{"amount": -9223372036854775808}`, false, ovf},
		{`{"amount": "x"}`, false, "unary - needs a number"},
	})
	checkCond(t, "allow", "abs(amount) <= 100", []condCase{
		{`{"amount": -100}`, true, ""},
		{`{"amount": -9223372036854775808}`, false, ovf},
	})
	checkCond(t, "allow", "int(amount) <= 100", []condCase{
		{`{"amount": 99.9}`, true, ""},
		{`{"amount": "42"}`, true, ""},
		{`{"amount": 1e300}`, false, ovf},
		{`{"amount": -1e19}`, false, ovf},
		{`{"amount": "99999999999999999999"}`, false, "fits 64 bits"},
	})
	checkCond(t, "allow", "total / count <= 10", []condCase{
		{`{"total": 100, "count": 10}`, true, ""},
		{`{"total": 100, "count": 0}`, false, "division by zero"},
		{`{"total": 1e308, "count": 1e-308}`, false, ovf},
	})
	checkCond(t, "allow", "n % m == 0", []condCase{
		{`{"n": 10, "m": 5}`, true, ""},
		{`{"n": 10, "m": 0}`, false, "divide by zero"},
		{`{"n": -9223372036854775808, "m": -1}`, true, ""},
		{`{"n": 1.5, "m": 1}`, false, "needs two integers"},
	})
	checkCond(t, "allow", "base ** exp <= 1000", []condCase{
		{`{"base": 10, "exp": 3}`, true, ""},
		{`{"base": 10, "exp": 400}`, false, ovf},
		{`{"base": -1, "exp": 0.5}`, false, ovf}, // NaN
	})
	checkCond(t, "allow", "reduce(items, #acc + #, 0) <= 100", []condCase{
		{`{"items": [10, 20]}`, true, ""},
		{`{"items": [9223372036854775807, 9223372036854775807, 2]}`, false, ovf},
	})
	// A deny line whose arithmetic overflows applies.
	checkCond(t, "deny", "quantity * price > 1000", []condCase{
		{`{"quantity": 2, "price": 400}`, true, ""},
		{`{"quantity": 4611686018427387905, "price": 4}`, false, ovf},
	})
	// Strings still join; dates and durations keep expr's arithmetic.
	checkCond(t, "allow", "prefix + '/' + name == 'a/b'", []condCase{{`{"prefix": "a", "name": "b"}`, true, ""}})
	checkCond(t, "allow", "date(to) - date(from) <= duration('48h')", []condCase{
		{`{"from": "2024-01-01T00:00:00Z", "to": "2024-01-02T00:00:00Z"}`, true, ""},
		{`{"from": "2024-01-01T00:00:00Z", "to": "2024-01-04T00:00:00Z"}`, false, ""},
	})
}

// TestArithmeticRefusedAtLoad: what cannot be checked is not available.
func TestArithmeticRefusedAtLoad(t *testing.T) {
	for cond, want := range map[string]string{
		"sum(items) <= 100":            "sum() is not available",
		"sum(items, # * 2) <= 100":     "sum() is not available",
		"bitshl(amount, 1) <= 100":     "bitshl() is not available",
		"bitand(amount, 255) == 0":     "bitand() is not available",
		"amount * 2":                   "not true or false",
		"amount ** 2":                  "not true or false",
		"abs(amount)":                  "not true or false",
		"status == nil":                "comparing with nil",
		"nil != status":                "comparing with nil",
		"status matches '(unclosed'":   "not a valid regular expression",
		"status in [nil, 'cancelled']": "", // a nil item is a per-call error (below), not a load error
		"principal.roles contains 'x'": "write '<role>' in principal.roles instead",
	} {
		policy := "p, r, s/t, call, allow, \"" + strings.ReplaceAll(cond, `"`, `""`) + "\"\n"
		f := newFiles(t, readRoot(t, rootModel), policy)
		_, err := LoadPolicy(f.model, f.policy, Options{})
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", cond, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), f.policy+":1: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cond, err, want)
		}
	}
}

// TestComparisonsFailClosedOnKinds: == != < in contains... on operands of different kinds, on
// null, on lists and objects, are errors, so a deny line applies and an allow line does not. The
// reviewer's cases: deny status == 'cancelled' did not apply to ["cancelled"], {"x":1}, true,
// null; allow region != 'us' allowed ["us"] and null.
func TestComparisonsFailClosedOnKinds(t *testing.T) {
	wrong := []string{`["cancelled"]`, `{"x": 1}`, `{"cancelled": 1}`, `true`, `null`, `5`, `[]`}
	var cases []condCase
	for _, v := range wrong {
		cases = append(cases, condCase{`{"status": ` + v + `}`, false, "cannot use"})
	}
	cases = append(cases,
		condCase{`{"status": "cancelled"}`, false, ""},
		condCase{`{"status": "shipped"}`, true, ""},
		condCase{`{}`, false, `missing field "status"`})
	checkCond(t, "deny", "status == 'cancelled'", cases)
	checkCond(t, "deny", "not (status == 'cancelled')", cases[:len(wrong)])
	checkCond(t, "deny", "status in ['cancelled', 'refunded']", cases)
	checkCond(t, "deny", "status contains 'cancel'", cases)
	checkCond(t, "deny", "status startsWith 'cancel'", cases)
	checkCond(t, "deny", "status endsWith 'led'", cases)
	checkCond(t, "deny", "status matches '^cancel'", cases)

	var allow []condCase
	for _, v := range wrong {
		allow = append(allow, condCase{`{"region": ` + v + `}`, false, "cannot use"})
	}
	allow = append(allow,
		condCase{`{"region": "eu"}`, true, ""},
		condCase{`{"region": "us"}`, false, ""},
		condCase{`{"region": "US"}`, true, ""}) // strings compare exactly
	checkCond(t, "allow", "region != 'us'", allow)
	checkCond(t, "allow", "!(region == 'us')", allow)
	checkCond(t, "allow", "region not in ['us', 'ca']", allow)
	checkCond(t, "allow", "!(region contains 'us')", allow[:len(wrong)])

	// Numbers: an integer and a float compare as numbers; a string or null never does.
	checkCond(t, "allow", "amount <= 100", []condCase{
		{`{"amount": 100}`, true, ""}, {`{"amount": 100.0}`, true, ""}, {`{"amount": 100.5}`, false, ""},
		{`{"amount": "50"}`, false, "cannot use <= on a string and a number"},
		{`{"amount": null}`, false, "cannot use <= on null"},
		{`{"amount": [50]}`, false, "cannot use <= on a list and a number"},
		{`{"amount": true}`, false, "cannot use <= on a boolean and a number"},
	})
	checkCond(t, "deny", "amount != 100", []condCase{
		{`{"amount": 100}`, true, ""}, {`{"amount": 100.0}`, true, ""}, {`{"amount": 99}`, false, ""},
		{`{"amount": "100"}`, false, "cannot use != on a string and a number"},
		{`{"amount": null}`, false, "cannot use != on null"},
	})
	// null on both sides is an error too (nil == nil would be true in expr).
	p := loadWith(t, "", "p, r, s/t, call, allow, a == b\ng, u, r\n", Options{})
	if d := p.Decide(req("u", "s/t", `{"a": null, "b": null}`)); d.Allowed || d.CondErr == nil {
		t.Errorf("null == null: %+v", d)
	}
	// Strings order byte-wise; booleans do not order.
	checkCond(t, "allow", "code >= 'm'", []condCase{{`{"code": "x"}`, true, ""}, {`{"code": "a"}`, false, ""}, {`{"code": 5}`, false, "cannot use >="}})
	checkCond(t, "allow", "flag == true", []condCase{{`{"flag": true}`, true, ""}, {`{"flag": false}`, false, ""}, {`{"flag": "true"}`, false, "cannot use =="}})
	checkCond(t, "allow", "flag > false", []condCase{{`{"flag": true}`, false, "cannot use > on a boolean"}})
	// A list item of another kind is an error, even when another item matches.
	checkCond(t, "deny", "'admin' in tags", []condCase{
		{`{"tags": ["user", "admin"]}`, false, ""},
		{`{"tags": ["user"]}`, true, ""},
		{`{"tags": [1, "admin"]}`, false, "item 0 of the list is a number"},
		{`{"tags": ["user", null]}`, false, "item 1 of the list is null"},
		{`{"tags": "xadminx"}`, false, "in needs a list or an object"},
		{`{"tags": {"admin": 1}}`, false, ""}, // an object: key membership
		{`{"tags": null}`, false, "cannot use in"},
	})
	checkCond(t, "allow", "amount in [10, 20.5]", []condCase{{`{"amount": 10.0}`, true, ""}, {`{"amount": 20.5}`, true, ""}, {`{"amount": "10"}`, false, "cannot use in"}})
	checkCond(t, "deny", "status in [nil, 'cancelled']", []condCase{{`{"status": "shipped"}`, false, "item 0 of the list is null"}})
	checkCond(t, "allow", "n in 1..5", []condCase{{`{"n": 3}`, true, ""}, {`{"n": 6}`, false, ""}, {`{"n": "3"}`, false, "cannot use in"}})
	// contains is substring only: a list is an error, never membership.
	checkCond(t, "deny", "status contains 'cancel'", []condCase{
		{`{"status": "cancelled"}`, false, ""},
		{`{"status": ["cancel"]}`, false, "cannot use contains on a list"},
		{`{"status": ["cancelled"]}`, false, "cannot use contains on a list"},
	})
	// A predicate needs a list (expr iterates a string byte by byte).
	checkCond(t, "allow", "none(items, # > 100)", []condCase{
		{`{"items": [1, 2]}`, true, ""},
		{`{"items": [1, 200]}`, false, ""},
		{`{"items": "abcd"}`, false, "none() needs a list, not a string"},
		{`{"items": {"a": 1}}`, false, "needs a list"},
		{`{"items": null}`, false, "needs a list"},
		{`{"items": ["x"]}`, false, "cannot use >"},
	})
	// NaN never compares.
	checkCond(t, "deny", "float(x) > 100", []condCase{{`{"x": "NaN"}`, false, "NaN"}, {`{"x": "5"}`, true, ""}})
	// Testing for null is written type(x) == 'nil'.
	checkCond(t, "deny", "type(status) == 'nil'", []condCase{{`{"status": null}`, false, ""}, {`{"status": "x"}`, true, ""}})
}

// TestComparisonsLegit: the forms the docs promise keep working.
func TestComparisonsLegit(t *testing.T) {
	p := loadWith(t, "", `p, r, s/a, call, allow, "status in ['shipped', 'delivered'] && region == principal.region"
p, r, s/b, call, allow, 'lead' in principal.roles
p, r, s/c, call, allow, "'lead' in principal.roles && principal.name contains 'u'"
p, r, s/d, call, allow, "'amount' in args && amount < 10 || !('amount' in args)"
p, r, s/e, call, allow, "name startsWith 'x' && name endsWith 'y' && name matches '^x[a-z]*y' && name contains 'ab'"
p, r, s/f, call, allow, "order_id == 9007199254740993 && id2 == 42.0 && all(items, {#.qty > 0 && #.qty * #.price < 1000})"
p, r, s/g, call, allow, "status not in ['cancelled'] && len(items) < 3 && -amount < 0 && amount % 2 == 0"
p, lead, s/unused, call, allow
g, u, r
`, Options{})
	eu := map[string]string{"region": "eu"}
	tests := []struct {
		obj, args string
		roles     []string
		want      bool
	}{
		{"s/a", `{"status": "shipped", "region": "eu"}`, nil, true},
		{"s/a", `{"status": "lost", "region": "eu"}`, nil, false},
		{"s/b", `{}`, []string{"lead"}, true},
		{"s/b", `{}`, nil, false},
		{"s/c", `{}`, []string{"lead"}, true},
		{"s/c", `{}`, nil, false},
		{"s/d", `{"amount": 5}`, nil, true},
		{"s/d", `{"amount": 50}`, nil, false},
		{"s/d", `{}`, nil, true},
		{"s/e", `{"name": "xaby"}`, nil, true},
		{"s/e", `{"name": "xay"}`, nil, false},
		{"s/f", `{"order_id": 9007199254740993, "id2": 42, "items": [{"qty": 1, "price": 5}]}`, nil, true},
		{"s/f", `{"order_id": 9007199254740992, "id2": 42, "items": [{"qty": 1, "price": 5}]}`, nil, false},
		{"s/g", `{"status": "shipped", "items": [1], "amount": 4}`, nil, true},
		{"s/g", `{"status": "cancelled", "items": [1], "amount": 4}`, nil, false},
	}
	for _, tc := range tests {
		r := req("u", tc.obj, tc.args, tc.roles...)
		r.Subject.Attrs = eu
		if d := p.Decide(r); d.Allowed != tc.want || d.Internal != nil {
			t.Errorf("%s %s %v: %v (%v, %v), want %v", tc.obj, tc.args, tc.roles, d.Allowed, d.Internal, d.CondErr, tc.want)
		}
	}
}

// TestStrictFunctions pins the strict helpers directly, for the edge cases JSON cannot produce.
func TestStrictFunctions(t *testing.T) {
	if _, err := checkedMul(int64(math.MinInt64), -1); err == nil {
		t.Error("MinInt64 * -1")
	}
	if v, err := checkedMul(int64(math.MaxInt64), 1); err != nil || v != int64(math.MaxInt64) {
		t.Errorf("MaxInt64 * 1 = %v, %v", v, err)
	}
	if v, err := checkedAdd(int64(math.MaxInt64), -1); err != nil || v != int64(math.MaxInt64-1) {
		t.Errorf("MaxInt64 + -1 = %v, %v", v, err)
	}
	if _, err := checkedSub(int64(math.MinInt64), 1); err == nil {
		t.Error("MinInt64 - 1")
	}
	if v, err := checkedSub(int64(-1), int64(math.MinInt64)); err != nil || v != int64(math.MaxInt64) {
		t.Errorf("-1 - MinInt64 = %v, %v", v, err)
	}
	if _, err := checkedAdd(1, "x"); err == nil {
		t.Error("1 + 'x'")
	}
	if _, err := checkedAdd(nil, 1); err == nil || !strings.Contains(err.Error(), "null") {
		t.Errorf("null + 1: %v", err)
	}
	if eq, err := strictEqual("==", 1, 1.0); err != nil || !eq {
		t.Errorf("1 == 1.0: %v %v", eq, err)
	}
	if _, err := strictEqual("==", []any{1}, []any{1}); err == nil {
		t.Error("list == list")
	}
	if _, err := strictEqual("==", math.NaN(), 1.0); err == nil {
		t.Error("NaN == 1")
	}
}
