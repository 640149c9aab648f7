package authz

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm/runtime"
)

// Conditions do not use expr's own operators: expr compares values of different kinds as
// "not equal" (so status == 'cancelled' is simply false for status ["cancelled"], and a deny
// line silently does not apply), reads contains/startsWith/endsWith/matches on null as false,
// and wraps int64 arithmetic around on overflow (so quantity * price <= 1000 can hold for a
// huge quantity). The compiler rewrites every comparison, membership test and arithmetic
// operator of a condition into one of the functions below, which return an ERROR instead:
// the line then fails closed per effect (an allow line does not apply, a deny line does).
//
// The rules:
//
//   - == and != compare a number with a number (an integer with a float as two floats), a
//     string with a string, a boolean with a boolean (and a date or a duration with its own
//     kind). Anything else is an error: null (on either side, both included), a list, an
//     object, or two different kinds.
//   - < <= > >= order numbers, strings (byte-wise), dates and durations; the same kind on both
//     sides.
//   - x in list: x is a number, string or boolean and every item of the list is of x's kind (an
//     item of another kind, null included, is an error even when another item matches). x in
//     object: x is a string, a key of the object. Anything else is an error.
//   - contains, startsWith, endsWith and matches: two strings. contains is never list
//     membership ("deny, status contains 'cancel'" must not skip ["cancelled"]); membership
//     is x in list, and principal.roles contains 'x' is refused at load with that advice.
//   - + - * / % ** ^ and unary - and +: numbers, and an integer result that overflows int64 is
//     an error, as is a float result that is infinite or not a number, a division by zero,
//     and % on a float. + also joins two strings. / and ** always give a float, as in expr.
//     Dates and durations keep expr's arithmetic.
//   - abs and int(): an overflow (abs of the smallest int64, int() of a float beyond int64) is
//     an error. sum() is not available (its total would wrap); write reduce(list, #acc + #, 0).
//   - all, any, none, one, filter, map, find..., count, groupBy, sortBy and reduce need a list
//     (expr would iterate the bytes of a string).
//   - NaN is an error wherever it is compared.
//
// The names start with "__toolgate_" and cannot be written in a policy: a function call is
// refused at load.
const (
	fnEq         = "__toolgate_eq"
	fnNe         = "__toolgate_ne"
	fnLt         = "__toolgate_lt"
	fnLe         = "__toolgate_le"
	fnGt         = "__toolgate_gt"
	fnGe         = "__toolgate_ge"
	fnIn         = "__toolgate_in"
	fnContains   = "__toolgate_contains"
	fnStartsWith = "__toolgate_startswith"
	fnEndsWith   = "__toolgate_endswith"
	fnMatches    = "__toolgate_matches"
	fnAdd        = "__toolgate_add"
	fnSub        = "__toolgate_sub"
	fnMul        = "__toolgate_mul"
	fnDiv        = "__toolgate_div"
	fnMod        = "__toolgate_mod"
	fnPow        = "__toolgate_pow"
	fnNeg        = "__toolgate_neg"
	fnPos        = "__toolgate_pos"
	fnAbs        = "__toolgate_abs"
	fnInt        = "__toolgate_int"
	fnList       = "__toolgate_list"
)

// predicates are the builtins that iterate over their first argument. expr iterates a string
// byte by byte (none(items, # > 100) holds for items "abcd"), so the first argument must be a
// list: it is wrapped in fnList, which fails on anything else.
var predicates = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true, "map": true,
	"find": true, "findIndex": true, "findLast": true, "findLastIndex": true, "count": true,
	"groupBy": true, "sortBy": true, "reduce": true,
}

// boolOps are the binary operators rewritten into a strict function that gives true or false.
var boolOps = map[string]string{
	"==": fnEq, "!=": fnNe, "<": fnLt, "<=": fnLe, ">": fnGt, ">=": fnGe,
	"in": fnIn, "contains": fnContains, "startsWith": fnStartsWith, "endsWith": fnEndsWith, "matches": fnMatches,
}

// arithOps are the binary operators rewritten into a checked function that gives a value.
var arithOps = map[string]string{
	"+": fnAdd, "-": fnSub, "*": fnMul, "/": fnDiv, "%": fnMod, "**": fnPow, "^": fnPow,
}

// valueFns are the strict functions whose result is not a boolean (a condition that is one of
// them at the top is a value, not true or false).
var valueFns = map[string]bool{
	fnAdd: true, fnSub: true, fnMul: true, fnDiv: true, fnMod: true, fnPow: true,
	fnNeg: true, fnPos: true, fnAbs: true, fnInt: true,
}

// strictOptions declares the strict functions to expr.
func strictOptions() []expr.Option {
	boolType := new(func(any, any) bool)
	binary := func(name, op string, f func(a, b any) (bool, error)) expr.Option {
		return expr.Function(name, func(params ...any) (any, error) {
			if len(params) != 2 {
				return nil, fmt.Errorf("internal: %s with %d operands", op, len(params))
			}
			return f(params[0], params[1])
		}, boolType)
	}
	value := func(name, op string, f func(a, b any) (any, error)) expr.Option {
		return expr.Function(name, func(params ...any) (any, error) {
			if len(params) != 2 {
				return nil, fmt.Errorf("internal: %s with %d operands", op, len(params))
			}
			return f(params[0], params[1])
		})
	}
	unary := func(name, op string, f func(a any) (any, error)) expr.Option {
		return expr.Function(name, func(params ...any) (any, error) {
			if len(params) != 1 {
				return nil, fmt.Errorf("internal: %s with %d operands", op, len(params))
			}
			return f(params[0])
		})
	}
	return []expr.Option{
		binary(fnEq, "==", func(a, b any) (bool, error) { return strictEqual("==", a, b) }),
		binary(fnNe, "!=", func(a, b any) (bool, error) {
			eq, err := strictEqual("!=", a, b)
			return !eq, err
		}),
		binary(fnLt, "<", func(a, b any) (bool, error) { return strictOrder("<", a, b) }),
		binary(fnLe, "<=", func(a, b any) (bool, error) { return strictOrder("<=", a, b) }),
		binary(fnGt, ">", func(a, b any) (bool, error) { return strictOrder(">", a, b) }),
		binary(fnGe, ">=", func(a, b any) (bool, error) { return strictOrder(">=", a, b) }),
		binary(fnIn, "in", strictIn),
		binary(fnContains, "contains", strictContains),
		binary(fnStartsWith, "startsWith", func(a, b any) (bool, error) {
			x, y, err := twoStrings("startsWith", a, b)
			return err == nil && strings.HasPrefix(x, y), err
		}),
		binary(fnEndsWith, "endsWith", func(a, b any) (bool, error) {
			x, y, err := twoStrings("endsWith", a, b)
			return err == nil && strings.HasSuffix(x, y), err
		}),
		binary(fnMatches, "matches", strictMatches),
		value(fnAdd, "+", checkedAdd),
		value(fnSub, "-", checkedSub),
		value(fnMul, "*", checkedMul),
		value(fnDiv, "/", checkedDiv),
		value(fnMod, "%", checkedMod),
		value(fnPow, "**", checkedPow),
		unary(fnNeg, "-", checkedNeg),
		unary(fnPos, "+", func(a any) (any, error) {
			if _, ok := toNum(a); !ok {
				return nil, fmt.Errorf("unary + needs a number, not %s", kindOf(a))
			}
			return a, nil
		}),
		unary(fnAbs, "abs", checkedAbs),
		unary(fnInt, "int", checkedInt),
		value(fnList, "a predicate", func(a, name any) (any, error) {
			if a != nil {
				if k := reflect.TypeOf(a).Kind(); k == reflect.Slice || k == reflect.Array {
					return a, nil
				}
			}
			return nil, fmt.Errorf("%v() needs a list, not %s", name, kindOf(a))
		}),
	}
}

// num is a number from the arguments (int64 or float64) or a literal (int or float64).
type num struct {
	i     int64
	f     float64
	float bool
}

func (n num) asFloat() float64 {
	if n.float {
		return n.f
	}
	return float64(n.i)
}

// toNum reads a Go number. time.Duration is not a number here (it has its own kind).
func toNum(v any) (num, bool) {
	switch x := v.(type) {
	case int:
		return num{i: int64(x)}, true
	case int8:
		return num{i: int64(x)}, true
	case int16:
		return num{i: int64(x)}, true
	case int32:
		return num{i: int64(x)}, true
	case int64:
		return num{i: x}, true
	case uint:
		return uintNum(uint64(x)), true
	case uint8:
		return num{i: int64(x)}, true
	case uint16:
		return num{i: int64(x)}, true
	case uint32:
		return num{i: int64(x)}, true
	case uint64:
		return uintNum(x), true
	case float32:
		return num{f: float64(x), float: true}, true
	case float64:
		return num{f: x, float: true}, true
	}
	return num{}, false
}

func uintNum(x uint64) num {
	if x > math.MaxInt64 {
		return num{f: float64(x), float: true}
	}
	return num{i: int64(x)}
}

// kindOf names a value's kind for an error message, in JSON's words.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case time.Time:
		return "a date"
	case time.Duration:
		return "a duration"
	}
	if _, ok := toNum(v); ok {
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

func notNaN(op string, ns ...num) error {
	for _, n := range ns {
		if n.float && math.IsNaN(n.f) {
			return fmt.Errorf("%s on NaN", op)
		}
	}
	return nil
}

func mismatch(op string, a, b any) error {
	if a == nil || b == nil {
		return fmt.Errorf("cannot use %s on null (%s %s %s)", op, kindOf(a), op, kindOf(b))
	}
	return fmt.Errorf("cannot use %s on %s and %s", op, kindOf(a), kindOf(b))
}

// cmpNums compares two numbers: exactly when both are integers, else as two float64s.
func cmpNums(a, b num) int {
	if !a.float && !b.float {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	x, y := a.asFloat(), b.asFloat()
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// strictEqual is == (and, negated, !=): scalars of the same kind only.
func strictEqual(op string, a, b any) (bool, error) {
	if x, ok := toNum(a); ok {
		y, ok := toNum(b)
		if !ok {
			return false, mismatch(op, a, b)
		}
		if err := notNaN(op, x, y); err != nil {
			return false, err
		}
		return cmpNums(x, y) == 0, nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x == y, nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			return x == y, nil
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Equal(y), nil
		}
	case time.Duration:
		if y, ok := b.(time.Duration); ok {
			return x == y, nil
		}
	}
	return false, mismatch(op, a, b)
}

// strictOrder is < <= > >=: two numbers, two strings, two dates or two durations.
func strictOrder(op string, a, b any) (bool, error) {
	c, err := strictCompare(op, a, b)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

func strictCompare(op string, a, b any) (int, error) {
	if x, ok := toNum(a); ok {
		y, ok := toNum(b)
		if !ok {
			return 0, mismatch(op, a, b)
		}
		if err := notNaN(op, x, y); err != nil {
			return 0, err
		}
		return cmpNums(x, y), nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), nil
		}
	case time.Duration:
		if y, ok := b.(time.Duration); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	}
	return 0, mismatch(op, a, b)
}

// isScalar: a number, a string or a boolean.
func isScalar(v any) bool {
	switch v.(type) {
	case string, bool:
		return true
	}
	_, ok := toNum(v)
	return ok
}

// strictIn is x in list (every item of x's kind) and x in object (x a string key).
func strictIn(needle, haystack any) (bool, error) {
	switch h := haystack.(type) {
	case []any:
		return listHas("in", h, needle)
	case map[string]any:
		k, ok := needle.(string)
		if !ok {
			return false, fmt.Errorf("cannot use in on %s and an object (the keys of an object are strings)", kindOf(needle))
		}
		_, found := h[k]
		return found, nil
	}
	if arr, ok := toList(haystack); ok {
		return listHas("in", arr, needle)
	}
	return false, fmt.Errorf("cannot use in on %s and %s (in needs a list or an object on the right)", kindOf(needle), kindOf(haystack))
}

// toList converts the lists expr builds itself ([]int from a range, typed slices) to []any.
func toList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []int:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, true
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, true
	case []float64:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, true
	}
	return nil, false
}

// listHas reports whether list holds needle; every item must be of needle's kind.
func listHas(op string, list []any, needle any) (bool, error) {
	if !isScalar(needle) {
		return false, fmt.Errorf("cannot use %s with %s as the value to look for (a number, string or boolean is needed)", op, kindOf(needle))
	}
	found := false
	for i, item := range list {
		eq, err := strictEqual(op, needle, item)
		if err != nil {
			return false, fmt.Errorf("cannot use %s: item %d of the list is %s, the value looked for is %s", op, i, kindOf(item), kindOf(needle))
		}
		found = found || eq
	}
	return found, nil
}

// strictContains is substring, on two strings only.
func strictContains(a, b any) (bool, error) {
	x, y, err := twoStrings("contains", a, b)
	return err == nil && strings.Contains(x, y), err
}

func twoStrings(op string, a, b any) (string, string, error) {
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	if !ok1 || !ok2 {
		return "", "", mismatch(op, a, b)
	}
	return x, y, nil
}

// constPatterns are the regular expressions written in conditions (x matches '...'), compiled at
// load. A pattern read from the arguments or attributes is compiled per call.
var constPatterns sync.Map // string -> *regexp.Regexp

func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := constPatterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	return regexp.Compile(p)
}

func strictMatches(a, b any) (bool, error) {
	s, p, err := twoStrings("matches", a, b)
	if err != nil {
		return false, err
	}
	re, err := compilePattern(p)
	if err != nil {
		return false, fmt.Errorf("matches: %v", err)
	}
	return re.MatchString(s), nil
}

// arith reads two numbers for an arithmetic operator; dates and durations go to expr's own
// arithmetic (isTime), anything else is an error.
func arith(op string, a, b any) (x, y num, isTime bool, err error) {
	x, ok1 := toNum(a)
	y, ok2 := toNum(b)
	if ok1 && ok2 {
		return x, y, false, nil
	}
	if timeKind(a) && timeKind(b) || timeKind(a) && ok2 || ok1 && timeKind(b) {
		return x, y, true, nil
	}
	return x, y, false, mismatch(op, a, b)
}

func timeKind(v any) bool {
	switch v.(type) {
	case time.Time, time.Duration:
		return true
	}
	return false
}

// exprArith runs expr's own arithmetic (dates and durations), its panics as errors.
func exprArith(op string, a, b any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%v", r)
		}
	}()
	switch op {
	case "+":
		return runtime.Add(a, b), nil
	case "-":
		return runtime.Subtract(a, b), nil
	case "*":
		return runtime.Multiply(a, b), nil
	}
	return nil, fmt.Errorf("cannot use %s on %s and %s", op, kindOf(a), kindOf(b))
}

func floatResult(op string, f float64) (any, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("%s overflows (the result is not a finite number)", op)
	}
	return f, nil
}

func overflow(op string, a, b int64) error {
	return fmt.Errorf("%d %s %d overflows a 64-bit integer", a, op, b)
}

func checkedAdd(a, b any) (any, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return x + y, nil
		}
	}
	x, y, isTime, err := arith("+", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime:
		return exprArith("+", a, b)
	case x.float || y.float:
		return floatResult("+", x.asFloat()+y.asFloat())
	}
	s := x.i + y.i
	if (x.i > 0 && y.i > 0 && s < 0) || (x.i < 0 && y.i < 0 && s >= 0) {
		return nil, overflow("+", x.i, y.i)
	}
	return s, nil
}

func checkedSub(a, b any) (any, error) {
	x, y, isTime, err := arith("-", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime:
		return exprArith("-", a, b)
	case x.float || y.float:
		return floatResult("-", x.asFloat()-y.asFloat())
	}
	d := x.i - y.i
	if (x.i^y.i)&(x.i^d) < 0 {
		return nil, overflow("-", x.i, y.i)
	}
	return d, nil
}

func checkedMul(a, b any) (any, error) {
	x, y, isTime, err := arith("*", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime:
		return exprArith("*", a, b)
	case x.float || y.float:
		return floatResult("*", x.asFloat()*y.asFloat())
	}
	if x.i == 0 || y.i == 0 {
		return int64(0), nil
	}
	p := x.i * y.i
	if p/y.i != x.i || (x.i == -1 && y.i == math.MinInt64) || (y.i == -1 && x.i == math.MinInt64) {
		return nil, overflow("*", x.i, y.i)
	}
	return p, nil
}

// checkedDiv is /, which gives a float as in expr.
func checkedDiv(a, b any) (any, error) {
	x, y, isTime, err := arith("/", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime:
		return nil, fmt.Errorf("/ needs two numbers, not %s and %s", kindOf(a), kindOf(b))
	case y.asFloat() == 0:
		return nil, fmt.Errorf("division by zero")
	}
	return floatResult("/", x.asFloat()/y.asFloat())
}

// checkedMod is %, on integers only, as in expr.
func checkedMod(a, b any) (any, error) {
	x, y, isTime, err := arith("%", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime || x.float || y.float:
		return nil, fmt.Errorf("%% needs two integers, not %s and %s", kindOf(a), kindOf(b))
	case y.i == 0:
		return nil, fmt.Errorf("integer divide by zero")
	}
	return x.i % y.i, nil // MinInt64 % -1 is 0 in Go, no panic
}

// checkedPow is ** (and ^), which gives a float as in expr.
func checkedPow(a, b any) (any, error) {
	x, y, isTime, err := arith("**", a, b)
	switch {
	case err != nil:
		return nil, err
	case isTime:
		return nil, fmt.Errorf("** needs two numbers, not %s and %s", kindOf(a), kindOf(b))
	}
	return floatResult("**", math.Pow(x.asFloat(), y.asFloat()))
}

func checkedNeg(a any) (any, error) {
	if d, ok := a.(time.Duration); ok {
		if d == math.MinInt64 {
			return nil, fmt.Errorf("-%v overflows", d)
		}
		return -d, nil
	}
	x, ok := toNum(a)
	switch {
	case !ok:
		return nil, fmt.Errorf("unary - needs a number, not %s", kindOf(a))
	case x.float:
		return -x.f, nil
	case x.i == math.MinInt64:
		return nil, fmt.Errorf("-(%d) overflows a 64-bit integer", x.i)
	}
	return -x.i, nil
}

func checkedAbs(a any) (any, error) {
	x, ok := toNum(a)
	switch {
	case !ok:
		return nil, fmt.Errorf("abs needs a number, not %s", kindOf(a))
	case x.float:
		return math.Abs(x.f), nil
	case x.i == math.MinInt64:
		return nil, fmt.Errorf("abs(%d) overflows a 64-bit integer", x.i)
	case x.i < 0:
		return -x.i, nil
	}
	return x.i, nil
}

// checkedInt is int(): a number or a decimal string to an integer, truncating a float toward
// zero; a value beyond int64 is an error, not a wrapped or saturated number.
func checkedInt(a any) (any, error) {
	if s, ok := a.(string); ok {
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("int(%q): not an integer that fits 64 bits", s)
		}
		return int(i), nil
	}
	x, ok := toNum(a)
	switch {
	case !ok:
		return nil, fmt.Errorf("int needs a number or a string, not %s", kindOf(a))
	case !x.float:
		return int(x.i), nil
	case math.IsNaN(x.f) || x.f >= 9223372036854775808.0 || x.f < -9223372036854775808.0:
		return nil, fmt.Errorf("int(%v) overflows a 64-bit integer", x.f)
	}
	return int(x.f), nil
}
