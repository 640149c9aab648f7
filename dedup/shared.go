package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Shared is a second level of duplicate suppression that several gateway
// replicas share (dedup/redisstore keeps it in Redis): in-flight markers and
// recorded answers that live outside any one process, so that an identical
// call sent to another replica is joined or replayed there too. Table stays
// the first level, for identical calls on the same replica; only the caller
// that Table lets run reaches Shared.
//
// Answers are opaque bytes here: the caller encodes and decodes them.
type Shared interface {
	// Claim settles who runs the call named key:
	//   - nobody holds it: this caller must run the call. Claim returns a
	//     Lease, which the caller ends with Lease.Done (the answer, recorded
	//     for window) or Lease.Release (the call never reached the tool, so
	//     an identical one may run);
	//   - an identical call finished within its window: its Answer, Replayed;
	//   - an identical call is running on some replica: Claim waits until it
	//     finishes (or until ctx ends) and returns its Answer, Joined. If it
	//     ended with Release instead, Claim tries again.
	//
	// Errors: ErrAbandoned when the replica running the identical call
	// stopped (its lease ran out) without recording an outcome; a
	// *RecoveringError (errors.Is ErrRecovering) while the store recovers
	// from losing its data and nothing may be claimed yet; ctx's error when
	// ctx ended while waiting; ErrWaitInterrupted (with the store's error)
	// when the store failed while waiting; anything else means the store
	// failed and nothing was decided. After an error the caller holds
	// nothing.
	Claim(ctx context.Context, key Key, window time.Duration) (Claim, error)
}

// Claim is what Shared.Claim settled: either a Lease (run the call) or an
// identical call's Answer.
type Claim struct {
	Lease   Lease
	Answer  []byte
	Sharing Sharing // Joined or Replayed, with Answer
}

// Lease is the right to run one call, held until Done or Release. While it
// is held, identical calls on every replica wait for it.
type Lease interface {
	// Done records answer for the window given to Claim (for the callers
	// waiting already even when the window is 0) and ends the lease.
	Done(ctx context.Context, answer []byte) error
	// Release ends the lease without an answer: the call never reached the
	// tool, so an identical call may run.
	Release(ctx context.Context) error
}

// ErrAbandoned is Shared.Claim's error when an identical call was being run
// by a replica that stopped (crashed, or lost the store for longer than its
// lease) before it recorded what happened. Whether that call reached the
// tool is unknown, so the identical call must not run again on its own.
var ErrAbandoned = errors.New("dedup: the replica running an identical call stopped before it recorded the outcome")

// ErrWaitInterrupted is in Shared.Claim's error when the store failed
// while Claim waited for an identical call running on some replica.
// Unlike a store failure at the first look, it is known that the call was
// running, so the caller must not run it, even when it runs calls the
// store cannot check (SharedFailOpen). When the store was unreachable for
// longer than the call's lease, the error is also ErrAbandoned: the
// marker, unrenewed, would be gone, and the outcome is unknown. Otherwise
// (a look that kept failing) it is refused for now, and a retry once the
// store answers joins or replays the answer. The error also wraps the
// store's own.
var ErrWaitInterrupted = errors.New("dedup: the shared store failed while this call waited for an identical call running elsewhere")

// ErrRecovering is what a *RecoveringError is (errors.Is): the shared store
// recently lost its data (a restart without persistence, a flush) or never
// had any, so calls that were running on some replica when it did may have
// no marker yet. New claims are refused for one lease, the time every live
// holder needs to renew, and so re-assert, its marker; markers already back
// are joined as usual. Nothing was decided: the call may be tried again
// after Left.
var ErrRecovering = errors.New("dedup: the shared store is recovering from a loss of its data")

// RecoveringError is Shared.Claim's error while the store recovers (see
// ErrRecovering).
type RecoveringError struct {
	Left time.Duration // until claims are accepted again
}

func (e *RecoveringError) Error() string {
	return fmt.Sprintf("%v; claims resume in %s", ErrRecovering, e.Left)
}

func (e *RecoveringError) Is(target error) bool { return target == ErrRecovering }
