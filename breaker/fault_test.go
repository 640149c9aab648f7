package breaker

import (
	"errors"
	"fmt"
	"testing"
)

type faultErr uint64

func (f faultErr) Error() string   { return fmt.Sprintf("fault %d", uint64(f)) }
func (f faultErr) FaultID() uint64 { return uint64(f) }

// The attempts one connection fault failed count once; attempts failed on
// their own, and outcomes that do not count against the upstream, are
// reported as they are.
func TestOncePerFault(t *testing.T) {
	s := NewSet(map[string]Settings{"a": {}, "b": {}}, nil)
	wrapped := fmt.Errorf("call: %w", faultErr(7))
	cases := []struct {
		server string
		o      Outcome
		err    error
		want   Outcome
	}{
		{"a", Broken, errors.New("alone"), Broken},
		{"a", Broken, faultErr(0), Broken}, // names no fault
		{"a", Succeeded, wrapped, Succeeded},
		{"a", Broken, wrapped, Broken},    // the first attempt of fault 7 counts
		{"a", Broken, wrapped, Cancelled}, // the others do not
		{"a", TimedOut, faultErr(7), Cancelled},
		{"b", Broken, wrapped, Broken},           // per upstream
		{"a", Broken, faultErr(5), Cancelled},    // older than the last counted
		{"a", ToolError, faultErr(9), ToolError}, // counts for the upstream: left as it is
		{"a", Broken, faultErr(9), Broken},
		{"unknown", Broken, faultErr(9), Broken},
	}
	for i, c := range cases {
		if got := s.OncePerFault(c.server, c.o, c.err); got != c.want {
			t.Errorf("case %d: OncePerFault(%s, %s, %v) = %s, want %s", i, c.server, c.o, c.err, got, c.want)
		}
	}
	var nilSet *Set
	if got := nilSet.OncePerFault("a", Broken, faultErr(11)); got != Broken {
		t.Errorf("nil Set: %s", got)
	}
}
