package breaker

import "errors"

// Fault is implemented by an attempt's error that says which fault of the upstream's connection failed
// it. One fault can fail several attempts at once: a stdio upstream's stray line (an answer under a wrong
// id, a line split by a raw newline) cannot be matched to the request it was meant for, so every request
// waiting on that connection fails; when the child's output ends, every request waiting fails too. Those
// attempts' errors name the same fault. FaultID is 0 for an error that names none (it failed on its own);
// otherwise it is greater than every fault named before it. upstreams.CallError implements it without
// importing this package.
type Fault interface {
	error
	FaultID() uint64
}

// FaultOf is the connection fault err names (a Fault anywhere in its chain), 0 when none.
func FaultOf(err error) uint64 {
	var f Fault
	if errors.As(err, &f) {
		return f.FaultID()
	}
	return 0
}

// OncePerFault is what to report through done for an attempt of server that ended with o and err: o,
// except that when err names a connection fault (FaultOf) already counted against server, an outcome
// that counts against the upstream is reported Cancelled (counted neither way). One fault of the
// connection is one failure of the upstream, however many attempts it failed: five calls waiting when a
// stray line arrives must not open a breaker that needs five consecutive failures. The first attempt
// of a fault to report counts; a fault whose id is not above the last one counted for server is taken as
// counted. A server the Set has no breaker for gets o.
func (s *Set) OncePerFault(server string, o Outcome, err error) Outcome {
	u := s.breaker(server)
	if u == nil || !o.CountsAgainstUpstream() {
		return o
	}
	id := FaultOf(err)
	if id == 0 {
		return o
	}
	for {
		last := u.lastFault.Load()
		if id <= last {
			return Cancelled
		}
		if u.lastFault.CompareAndSwap(last, id) {
			return o
		}
	}
}
